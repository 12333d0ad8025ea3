"""What a Runner strategy is, and the steps several of them share.

A strategy is one pattern's flow: how a batch is processed (which transactions wrap it,
which crash points it reaches between its steps) and when its offsets commit. The Runner's
loop calls ``process`` for each batch and ``commit_pending`` when a poll brings nothing,
before partitions are revoked and when it stops; a rebalance that takes partitions away
without a revoke calls ``partitions_lost``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import Message

from onceflow.crash_points import CrashPoints
from onceflow.db import Database, DatabaseError, Transaction
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_consumer import RunnerConsumer
from onceflow.patterns.runner_output import BatchOutput
from onceflow.patterns.runner_pending import Pending
from onceflow.patterns.runner_progress import RunStats
from onceflow.patterns.runner_work import BatchWork
from onceflow.patterns.transactional import batch_start_offsets

TP = tuple[str, int]


class Strategy(Protocol):
    """One pattern's flow, as the Runner's loop drives it."""

    # False when a failed batch's offsets are already committed (at_most_once): the
    # Runner then does not rewind it.
    rewinds_failed_batches: bool

    @property
    def offset_store(self) -> OffsetStore | None:
        """The database offsets partitions start from (db_offsets); None: Kafka's."""
        ...

    def process(self, messages: list[Message]) -> None:
        """Process one batch; a handler failure propagates as ``HandlerFailed`` (its
        ``starts`` set when the strategy rewound more than the batch)."""
        ...

    def commit_pending(self) -> None:
        """Commit what earlier batches left for the next commit (``commit_interval_ms``)."""
        ...

    def partitions_lost(self, partitions: list[TP]) -> None:
        """Partitions were taken away without a revoke: their offsets can no longer be
        committed."""
        ...


@dataclass(frozen=True, slots=True)
class RunnerParts:
    """What every strategy works with."""

    config: RunnerConfig
    consumer: RunnerConsumer
    work: BatchWork
    output: BatchOutput
    crash: CrashPoints
    stats: RunStats


def handle_in_transaction(
    work: BatchWork, messages: list[Message], tx: Transaction, inbox: Inbox | None
) -> None:
    """The batch's records through the handler in ``tx``, deduplicated by ``inbox`` if any."""
    if inbox is None:
        work.handle(messages, tx)
    else:
        work.handle_new(messages, tx, inbox)


def process_in_database(
    parts: RunnerParts, db: Database, messages: list[Message], inbox: Inbox | None = None
) -> None:
    """The deduplication article's flow inside one database transaction: begin
    (``after_begin``), the work and its outputs, flushed before the commit
    (``before_db_commit``), commit (``after_db_commit``, ``after_produce``)."""
    crash = parts.crash
    with db.transaction() as tx:
        crash.reached("after_begin")
        handle_in_transaction(parts.work, messages, tx, inbox)
        parts.output.flush_direct()  # the article's "produce" precedes the DB commit
        crash.reached("before_db_commit")
    crash.reached("after_db_commit")
    crash.reached("after_produce")


def process_or_back_off(
    parts: RunnerParts, db: Database | None, messages: list[Message], inbox: Inbox | None = None
) -> bool:
    """The batch in the database transaction (without a database: through the handler
    alone); False after a database error, the batch rolled back and its partitions paused."""
    try:
        if db is None:
            parts.work.handle(messages, None)
        else:
            process_in_database(parts, db, messages, inbox)
    except DatabaseError as error:
        parts.consumer.back_off(batch_start_offsets(messages), error)
        return False
    return True


class OffsetsAfterwards:
    """Kafka offsets committed after the work, for the batches of ``commit_interval_ms``
    together (at_least_once, the inbox). Without a database the direct producer's outputs
    are flushed first (``after_produce``): they precede the commit."""

    def __init__(self, parts: RunnerParts, flush_first: bool) -> None:
        self.parts = parts
        self.flush_first = flush_first
        self._pending = Pending()

    def add(self, messages: list[Message]) -> None:
        self._pending.add(messages)
        if self._pending.due(self.parts.config.commit_interval_ms):
            self.commit()

    def commit_pending(self) -> None:
        if self._pending:
            self.commit()

    def commit(self) -> None:
        parts = self.parts
        pending = self._pending.take()
        if self.flush_first:
            try:
                parts.output.flush_direct()
            except DatabaseError as error:
                parts.consumer.back_off(pending.starts, error)
                return
            parts.crash.reached("after_produce")
        synchronous = not parts.config.commit_async
        parts.stats.commits += parts.consumer.commit(pending.ends, synchronous)
        parts.crash.reached("after_kafka_commit")

    def drop(self, partitions: list[TP]) -> None:
        for tp in partitions:
            self._pending.drop(tp)
