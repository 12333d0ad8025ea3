"""A batch's records through the user's handler.

``BatchWork.handle(messages, tx)`` calls the handler once per record with a ``Context``;
``handle_new`` first claims the records' event ids in the inbox and skips those already
seen (the idempotent consumer). Undecodable values, and records that failed
``max_attempts`` times, go to the dead-letter topic; a handler that raises stops the batch
with ``HandlerFailed`` (the strategy rolls back; ``failed`` counts the attempt).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from confluent_kafka import Message

from onceflow.configuration_error import ConfigurationError
from onceflow.db import Database, DatabaseError, Transaction
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.records import DecodeError, Record, dead_letter_headers
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_output import BatchOutput, produce_record
from onceflow.patterns.runner_progress import RunStats
from onceflow.patterns.transactional import ProducerFenced

log = logging.getLogger("onceflow.patterns.runner")
TP = tuple[str, int]
Where = tuple[str, int, int]  # topic, partition, offset


class HandlerFailed(RuntimeError):
    def __init__(self, message: Message, error: BaseException) -> None:
        super().__init__(f"handler failed on {message.topic()}/{message.partition()}/"
                         f"{message.offset()}: {error!r}")  # fmt: skip
        self.message = message
        self.error = error
        self.starts: dict[TP, int] | None = None  # where the failed work was rewound to


class Context:
    """Per-batch handle given to the handler."""

    def __init__(self, output: BatchOutput, db: Database | None, tx: Transaction | None) -> None:
        self._output = output
        self._producer = output.batch_producer()
        self.db = db
        self.tx = tx

    def produce(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> None:
        producer = self._producer
        if producer is None:  # the outbox, or the direct producer made on first use
            self._output.produce(self.tx, topic, value, key, headers)
            return
        produce_record(producer, topic, value, key, headers)


Handler = Callable[[Record, Context], None]


class BatchWork:
    def __init__(
        self,
        handler: Handler,
        config: RunnerConfig,
        output: BatchOutput,
        stats: RunStats,
        db: Database | None,
    ) -> None:
        self.handler = handler
        self.config = config
        self.output = output
        self.stats = stats
        self.db = db
        self._failures: dict[Where, int] = defaultdict(int)
        self._poison: dict[Where, BaseException] = {}

    def handle(self, messages: list[Message], tx: Transaction | None) -> None:
        """Every record through the handler (``tx``: the batch's database transaction)."""
        self._handle(messages, tx, None, set())

    def handle_new(self, messages: list[Message], tx: Transaction, inbox: Inbox) -> None:
        """The records whose event id ``inbox`` has not seen, claiming the ids in ``tx``."""
        ids = [self.config.event_id(message) for message in messages]
        self._handle(messages, tx, ids, inbox.claim_many(tx, ids))

    def _handle(
        self,
        messages: list[Message],
        tx: Transaction | None,
        ids: list[str] | None,
        fresh: set[str],
    ) -> None:
        context = Context(self.output, self.db, tx)
        # The loop runs once per record: what it calls is looked up once per batch.
        decode, handler, record_of = self.config.decode, self.handler, Record.from_message
        processed = 0
        to_handle = messages
        if ids is not None or self._poison:
            to_handle = self._not_skipped(messages, tx, ids, fresh)
        try:
            for message in to_handle:
                try:
                    value = decode(message.value())
                except DecodeError as error:
                    self._dead_letter(tx, message, error)
                    continue
                try:
                    handler(record_of(message, value), context)
                except (DatabaseError, ProducerFenced):
                    raise
                except Exception as error:
                    raise HandlerFailed(message, error) from error
                processed += 1
        finally:
            self.stats.processed += processed

    def _not_skipped(
        self,
        messages: list[Message],
        tx: Transaction | None,
        ids: list[str] | None,
        fresh: set[str],
    ) -> Iterator[Message]:
        """The messages to handle, one at a time: duplicates skipped, and records that
        failed ``max_attempts`` times dead-lettered (in ``tx``) when their turn comes."""
        for position, message in enumerate(messages):
            if ids is not None:
                event_id = ids[position]
                if event_id not in fresh:
                    self.stats.duplicates_skipped += 1
                    continue
                fresh.discard(event_id)  # a second copy in this batch is a duplicate too
            if self._poison:
                where = (message.topic(), message.partition(), message.offset())
                poison = self._poison.pop(where, None)
                if poison is not None:
                    self._dead_letter(tx, message, poison)
                    continue
            yield message

    def failed(self, failure: HandlerFailed) -> int:
        """Count a failed attempt at the record; after ``max_attempts`` it is dead-lettered
        when it comes again. Returns the attempts so far."""
        message = failure.message
        where = (message.topic(), message.partition(), message.offset())
        self._failures[where] += 1
        attempts = self._failures[where]
        log.warning("%s (attempt %d of %d)", failure, attempts, self.config.max_attempts)
        if attempts >= self.config.max_attempts:
            del self._failures[where]
            self._poison[where] = failure.error  # dead-lettered on the next pass
        return attempts

    def _dead_letter(self, tx: Transaction | None, message: Message, error: BaseException) -> None:
        topic = self.config.dead_letter_topic
        if topic is None:
            raise ConfigurationError(
                f"poison record {message.topic()}/{message.partition()}/{message.offset()}"
                f" ({error}) and no dead_letter_topic configured"
            )
        self.output.produce(
            tx, topic, message.value(), message.key(), dead_letter_headers(message, error)
        )
        self.stats.dead_lettered += 1
        log.warning("dead-lettered %s/%d/%d: %s", message.topic(), message.partition(),
                    message.offset(), error)  # fmt: skip
