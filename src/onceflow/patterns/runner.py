"""A consumer runner: one loop for every delivery guarantee and exactly-once pattern.

``Runner(config, handler).run()`` consumes batches with confluent-kafka and, per the
configured ``processing_guarantee`` / ``pattern``, wraps each batch in the right
transactions and commits offsets at the right moment (see guarantees.py and the pattern
modules for the steps). The handler is called once per record::

    def handle(record: Record, ctx: Context) -> None:
        ctx.tx.execute("INSERT INTO orders (id, total) VALUES (?, ?)", (...))
        ctx.produce("order-events", key=record.key, value=b"...")

``ctx.tx`` is the database transaction (None without a database); ``ctx.produce`` goes into
the Kafka transaction (kafka_transactions), into the outbox (``outbox=True``) or to an
idempotent producer flushed before the offsets are committed (otherwise). With
``commit_interval_ms`` the batches of that interval share one transaction or one offset
commit (runner_pending.py holds what they span).

Consumer controls: ``subscribe`` (consumer groups) or manual ``assign``; ``seek`` to the
database offsets (db_offsets) and back to a batch's start after an error; ``pause`` a
partition whose database lock timed out and ``resume`` it after a backoff; commits sync or
async. SIGTERM (or ``stop()``) ends the loop after the current batch. A record whose value
cannot be decoded, or whose handler keeps failing, goes to the dead-letter topic with the
error in its headers, inside the batch's transaction where one is used.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from onceflow.client_errors import is_fatal
from onceflow.crash_points import CrashPoints
from onceflow.db import (
    ConfigurationError,
    Database,
    DatabaseError,
    Transaction,
    connect,
)
from onceflow.patterns.guarantees import CommitTiming, Pattern
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore, PartitionRevoked
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.records import DecodeError, Record, dead_letter_headers
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_output import BatchOutput
from onceflow.patterns.runner_pending import Pending
from onceflow.patterns.runner_progress import Progress, RunStats
from onceflow.patterns.starting_offsets import StartingOffsets
from onceflow.patterns.transactional import (
    KafkaTransaction,
    ProducerFenced,
    TransactionFailed,
    batch_start_offsets,
    next_offsets,
    rewind,
)

log = logging.getLogger(__name__)
TP = tuple[str, int]
Handler = Callable[[Record, "Context"], None]


class HandlerFailed(RuntimeError):
    def __init__(self, message: Message, error: BaseException) -> None:
        super().__init__(f"handler failed on {message.topic()}/{message.partition()}/"
                         f"{message.offset()}: {error!r}")  # fmt: skip
        self.message = message
        self.error = error
        self.starts: dict[TP, int] | None = None  # where the failed work was rewound to


class Context:
    """Per-batch handle given to the handler."""

    def __init__(self, runner: Runner, tx: Transaction | None) -> None:
        self._runner = runner
        self._produce = runner.output.produce
        self.tx = tx

    @property
    def db(self) -> Database | None:
        return self._runner.db

    def produce(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> None:
        self._produce(self.tx, topic, value, key, headers)


class Runner:
    def __init__(
        self,
        config: RunnerConfig,
        handler: Handler,
        crash_points: CrashPoints | None = None,
    ) -> None:
        self.config = config
        self.plan = config.validate()
        self.handler = handler
        self.crash = crash_points if crash_points is not None else CrashPoints.from_env()
        self.stats = RunStats()
        self.progress = Progress(self.stats, config.group_id, config.progress_log_s)
        self._stop = threading.Event()
        self._paused: dict[TP, float] = {}
        self._failures: dict[tuple[str, int, int], int] = defaultdict(int)
        self._poison: dict[tuple[str, int, int], BaseException] = {}
        self._commit_warned = False
        self.db: Database | None = None
        self.offsets: OffsetStore | None = None
        self.inbox: Inbox | None = None
        self.txn: KafkaTransaction | None = None
        self.output = BatchOutput(config.bootstrap_servers, config.producer_config)
        self.consumer: Consumer | None = None
        self._starts: StartingOffsets | None = None
        self._pending = Pending()
        self._closing = False

    # -- setup ------------------------------------------------------------------------

    def _open(self) -> None:
        c = self.config
        if c.database_url is not None:
            self.db = connect(
                c.database_url,
                lock_timeout_ms=c.lock_timeout_ms,
                statement_timeout_ms=c.statement_timeout_ms,
                max_poll_interval_ms=c.max_poll_interval_ms,
            )
            if self.plan.pattern is Pattern.DB_OFFSETS:
                self.offsets = OffsetStore(self.db, c.group_id, c.offsets_table)
                self.offsets.create_schema()
            if self.plan.inbox:
                self.inbox = Inbox(self.db, c.group_id, c.inbox_table)
                self.inbox.create_schema()
            if c.outbox:
                self.output.outbox = Outbox(self.db, c.outbox_table)
                self.output.outbox.create_schema()
        if self.plan.uses_kafka_transactions:
            assert c.transactional_id is not None
            self.txn = KafkaTransaction(c.bootstrap_servers, c.transactional_id, c.producer_config)
            self.output.txn = self.txn
        self.consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap_servers,
                "group.id": c.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "max.poll.interval.ms": c.max_poll_interval_ms,
                # librdkafka stops fetching for fetch.queue.backoff.ms (1000 ms by default)
                # whenever its prefetch queue holds more than queued.min.messages (100,000):
                # a Runner working through a backlog of small records then waits about a
                # second after every 100,000. Fetch again as soon as the queue has room.
                "fetch.queue.backoff.ms": 20,
                **c.consumer_config,
                "enable.partition.eof": True,  # tells when the Runner has caught up
            }
        )
        if self.txn is None and self.output.outbox is None:
            self.output.start_direct()  # handlers and the dead-letter topic produce through it
        self._starts = StartingOffsets(self.consumer, c, self.offsets, self.crash)
        if c.assign:
            self._assign_manually()
        else:
            log.info(
                "group %s: subscribed to %s; waiting for partitions", c.group_id, list(c.topics)
            )
            self.consumer.subscribe(
                list(c.topics),
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )

    def _assign_manually(self) -> None:
        assert self.consumer is not None
        if isinstance(self.config.assign, bool):
            partitions = []
            for topic in self.config.topics:
                metadata = self.consumer.list_topics(topic, timeout=30).topics[topic]
                if metadata.error is not None:
                    raise ConfigurationError(f"topic {topic!r}: {metadata.error}")
                partitions += [(topic, p) for p in sorted(metadata.partitions)]
        else:
            partitions = list(self.config.assign)
        assert self._starts is not None
        assignment = self._starts.assignment(partitions)
        self.progress.assigned(partitions)
        self.consumer.assign(assignment)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(tp.topic, tp.partition) for tp in partitions]
        self.progress.assigned(tps)
        if self.offsets is None:
            return
        assert self._starts is not None
        assignment = self._starts.assignment(tps)
        strategy = str(self.config.consumer_config.get("partition.assignment.strategy", ""))
        if "cooperative" in strategy:
            consumer.incremental_assign(assignment)
        else:
            consumer.assign(assignment)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not self._closing:
            self._commit_pending()  # before the partitions go: their next owner starts there
        self._forget_partitions(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions taken away without a revoke: their offsets can no longer be committed."""
        if self.txn is not None and self.txn.open:
            # the open transaction holds their outputs: it must not commit without them
            self._abort_pending_transaction("partitions lost")
        for tp in partitions:
            self._pending.drop((tp.topic, tp.partition))
        self._forget_partitions(partitions)

    def _forget_partitions(self, partitions: list[TopicPartition]) -> None:
        self.progress.revoked((tp.topic, tp.partition) for tp in partitions)
        for tp in partitions:
            self._paused.pop((tp.topic, tp.partition), None)

    # -- running ----------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the current batch, commit, leave the group and return from run()."""
        self._stop.set()

    def run(self) -> RunStats:
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: self.stop())
        try:
            self._open()
            self._loop()
        finally:
            self._close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return self.stats

    def _loop(self) -> None:
        assert self.consumer is not None
        while not self._stop.is_set():
            self._resume_due()
            self.progress.tick(self.consumer)
            messages = []
            for message in self._next_batch():
                error = message.error()
                if error is None:
                    messages.append(message)
                    self.progress.consumed((message.topic(), message.partition()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    self.progress.reached_end((message.topic(), message.partition()))
                elif is_fatal(error):
                    raise KafkaException(error)
                else:
                    log.warning("consumer: %s", error)
            if not messages:
                self._commit_pending()  # nothing more came: do not hold outputs back
                idle = self.progress.idle_for(paused=bool(self._paused))
                if self.config.idle_exit_s is not None and idle > self.config.idle_exit_s:
                    log.info("idle for %.1f s with no lag: stopping (idle_exit_s)", idle)
                    break
                continue
            self.crash.reached("after_consume")
            self.stats.batches += 1
            self._process(messages)
            self.progress.measure_lag(self.consumer)
        self._commit_pending()  # stopped: what was processed is committed before leaving

    def _next_batch(self) -> list[Message]:
        """Wait up to poll_timeout_s for a first event, then take what else is already
        fetched, up to batch_size, as Kafka's poll() does. (consume(batch_size, timeout)
        would wait for a full batch, or the whole timeout for the last records of a burst.)"""
        assert self.consumer is not None
        first = self.consumer.poll(self.config.poll_timeout_s)
        if first is None:
            return []
        if self.config.batch_size == 1:
            return [first]
        return [first, *self.consumer.consume(self.config.batch_size - 1, 0)]

    def _process(self, messages: list[Message]) -> None:
        p = self.plan
        try:
            if p.pattern is Pattern.DB_OFFSETS:
                by_partition: dict[TP, list[Message]] = defaultdict(list)
                for message in messages:
                    by_partition[(message.topic(), message.partition())].append(message)
                for tp, group in by_partition.items():
                    self._process_db_offsets(tp, group)
            elif p.pattern is Pattern.KAFKA_TRANSACTIONS:
                self._process_kafka_transaction(messages)
            else:
                self._process_plain(messages)
        except HandlerFailed as failure:
            self._note_failure(failure, failure.starts or batch_start_offsets(messages))

    # -- pattern bodies ---------------------------------------------------------------

    def _process_plain(self, messages: list[Message]) -> None:
        """at_most_once, at_least_once, and the inbox (at_least_once + dedup)."""
        if self.plan.commit is CommitTiming.BEFORE:
            if not self._commit_kafka(next_offsets(messages), synchronous=True):
                self._rewind(messages)  # not committed: do not process (retry later)
                return
            self.stats.commits += 1
            self.crash.reached("after_kafka_commit")
        deferred = self.plan.commit is CommitTiming.AFTER
        try:
            if self.db is not None:
                with self.db.transaction() as tx:
                    self.crash.reached("after_begin")
                    self._handle_all(messages, tx)
                    self.output.flush_direct()  # the article's "produce" precedes the DB commit
                    self.crash.reached("before_db_commit")
                self.crash.reached("after_db_commit")
                self.crash.reached("after_produce")
            else:
                self._handle_all(messages, None)
                if not deferred:
                    self.output.flush_direct()
                    self.crash.reached("after_produce")
        except DatabaseError as error:
            self._database_trouble(batch_start_offsets(messages), error)
            return
        if deferred:
            self._pending.add(messages)
            if self._pending.due(self.config.commit_interval_ms):
                self._commit_plain()

    def _commit_plain(self) -> None:
        """Commit the offsets of the batches processed since the last commit (at-least-once:
        without a database, their outputs are flushed first)."""
        pending = self._pending.take()
        if self.db is None:
            try:
                self.output.flush_direct()
            except DatabaseError as error:
                self._database_trouble(pending.starts, error)
                return
            self.crash.reached("after_produce")
        synchronous = not self.config.commit_async
        self.stats.commits += self._commit_kafka(pending.ends, synchronous)
        self.crash.reached("after_kafka_commit")

    def _process_db_offsets(self, tp: TP, messages: list[Message]) -> None:
        assert self.db is not None and self.offsets is not None and self.consumer is not None
        if tp not in self.progress.owned:
            return  # revoked: the new owner processes these records
        if tp in self._paused:  # records fetched before the pause: read them again later
            self._rewind_to({tp: messages[0].offset()})
            return
        try:
            with self.db.transaction() as tx:
                stored = self.offsets.lock(tx, *tp)
                self.crash.reached("after_lock_batch")
                fresh = [m for m in messages if stored is None or m.offset() >= stored]
                self.stats.stale_skipped += len(messages) - len(fresh)
                if not fresh:
                    return
                self._handle_all(fresh, tx)
                self.crash.reached("after_work")
                self.offsets.store(tx, *tp, fresh[-1].offset() + 1)
                self.crash.reached("after_store_offset")
                self.output.flush_direct()
                if tp not in self.progress.owned:
                    raise PartitionRevoked(f"{tp[0]}[{tp[1]}] revoked during the batch")
                self.crash.reached("before_db_commit")
            self.stats.commits += 1
            self.crash.reached("after_db_commit")
        except PartitionRevoked as error:
            log.info("rolled back: %s", error)
            return
        except DatabaseError as error:
            self._database_trouble(batch_start_offsets(messages), error)
            return
        # Kafka's offset only speeds up the next start; the database's is the truth.
        self._commit_kafka({tp: messages[-1].offset() + 1}, synchronous=False)
        self.crash.reached("after_kafka_commit")

    def _process_kafka_transaction(self, messages: list[Message]) -> None:
        assert self.txn is not None and self.consumer is not None
        txn = self.txn
        self._pending.add(messages)  # empty whenever no transaction is open
        try:
            if not txn.open:
                txn.begin()
                self.crash.reached("after_begin")
            if self.db is not None:  # DB work first, then the Kafka commit (article order)
                with self.db.transaction() as tx:
                    self._handle_all(messages, tx)
                    self.crash.reached("before_db_commit")
                self.crash.reached("after_db_commit")
            else:
                self._handle_all(messages, None)
            self.crash.reached("after_produce")
            if self._pending.due(self.config.commit_interval_ms):
                self._commit_transaction()
        except KafkaException as error:
            self._transaction_failed(error)
        except (HandlerFailed, DatabaseError) as failure:
            # the whole transaction goes: every batch in it is read again
            starts = self._pending.take().starts
            self.stats.aborted += 1
            txn.abort()
            self._rewind_to(starts)
            if isinstance(failure, HandlerFailed):
                failure.starts = starts
            raise

    def _commit_transaction(self) -> None:
        assert self.txn is not None and self.consumer is not None
        self.txn.send_offsets(self.consumer, self._pending.ends)
        self.crash.reached("after_send_offsets")
        self.txn.commit()
        self._pending.take()
        self.stats.commits += 1
        self.crash.reached("after_kafka_commit")

    def _transaction_failed(self, error: KafkaException) -> None:
        """Abort, rewind to the transaction's first offsets and back off (or raise
        ProducerFenced)."""
        assert self.txn is not None and self.consumer is not None
        starts = self._pending.take().starts
        self.stats.aborted += 1
        self.stats.retries += 1
        try:
            self.txn.fail(error, self.consumer, starts)  # aborts, rewinds and raises
        except TransactionFailed as failed:
            self.progress.rewound(starts)
            log.warning("transaction aborted, its batches rewound: %s", failed)
            time.sleep(self.config.retry_backoff_s)

    def _abort_pending_transaction(self, why: str) -> None:
        assert self.txn is not None
        starts = self._pending.take().starts
        log.warning("aborting the open transaction (%s)", why)
        self.stats.aborted += 1
        try:
            self.txn.abort()
        except KafkaException as error:
            raise ProducerFenced(f"abort failed: {error}") from error
        self._rewind_to(starts)

    def _commit_pending(self) -> None:
        """Commit what earlier batches left for the next commit (commit_interval_ms)."""
        if not self._pending:
            return
        if self.txn is not None:
            try:
                self._commit_transaction()
            except KafkaException as error:
                self._transaction_failed(error)
        else:
            self._commit_plain()

    # -- records ----------------------------------------------------------------------

    def _handle_all(self, messages: list[Message], tx: Transaction | None) -> None:
        context = Context(self, tx)
        fresh: set[str] = set()
        if self.inbox is not None:
            assert tx is not None
            ids = [self.config.event_id(message) for message in messages]
            fresh = self.inbox.claim_many(tx, ids)
        for position, message in enumerate(messages):
            if self.inbox is not None:
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
            try:
                value = self.config.decode(message.value())
            except DecodeError as error:
                self._dead_letter(tx, message, error)
                continue
            try:
                self.handler(Record.from_message(message, value), context)
            except (DatabaseError, ProducerFenced):
                raise
            except Exception as error:
                raise HandlerFailed(message, error) from error
            self.stats.processed += 1

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

    # -- offsets, errors --------------------------------------------------------------

    def _commit_kafka(self, offsets: dict[TP, int], synchronous: bool) -> bool:
        assert self.consumer is not None
        owned = [
            TopicPartition(t, p, o)
            for (t, p), o in offsets.items()
            if (t, p) in self.progress.owned
        ]
        if not owned:
            return False
        try:
            self.consumer.commit(offsets=owned, asynchronous=not synchronous)
            return True
        except KafkaException as error:
            self.stats.commit_failures += 1
            if not self._commit_warned:
                log.warning("offset commit failed (will be retried by the next batch): %s", error)
                self._commit_warned = True
            return False

    def _rewind(self, messages: list[Message]) -> None:
        self._rewind_to(batch_start_offsets(messages))

    def _rewind_to(self, offsets: dict[TP, int]) -> None:
        assert self.consumer is not None
        rewind(self.consumer, offsets)
        self.progress.rewound(offsets)

    def _database_trouble(self, starts: dict[TP, int], error: DatabaseError) -> None:
        """Roll back (done), rewind, and pause the batch's partitions for a backoff."""
        assert self.consumer is not None
        log.warning("database error, batch rolled back and paused: %s", error)
        self.stats.retries += 1
        self._rewind_to(starts)
        tps = set(starts)
        self.consumer.pause([TopicPartition(t, p) for t, p in tps])
        resume_at = time.monotonic() + self.config.retry_backoff_s
        for tp in tps:
            self._paused[tp] = resume_at

    def _resume_due(self) -> None:
        if not self._paused:
            return
        assert self.consumer is not None
        now = time.monotonic()
        due = [tp for tp, at in self._paused.items() if at <= now]
        if due:
            self.consumer.resume([TopicPartition(t, p) for t, p in due])
            for tp in due:
                del self._paused[tp]

    def _note_failure(self, failure: HandlerFailed, starts: dict[TP, int]) -> None:
        message = failure.message
        where = (message.topic(), message.partition(), message.offset())
        self._failures[where] += 1
        attempts = self._failures[where]
        log.warning("%s (attempt %d of %d)", failure, attempts, self.config.max_attempts)
        if attempts >= self.config.max_attempts:
            del self._failures[where]
            self._poison[where] = failure.error  # dead-lettered on the next pass
        if self.plan.commit is CommitTiming.BEFORE:
            return  # at_most_once: already committed, never processed again
        self.stats.retries += 1
        self._rewind_to(starts)
        time.sleep(min(self.config.retry_backoff_s * attempts, 5.0))

    def _close(self) -> None:
        self._closing = True
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception as error:  # already closed / broker gone: nothing to lose
                log.debug("consumer close: %s", error)
        self.output.close()
        if self.db is not None:
            self.db.close()
