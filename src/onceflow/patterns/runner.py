"""A consumer runner: one loop for every delivery guarantee and exactly-once pattern.

``Runner(config, handler).run()`` consumes batches with confluent-kafka and hands each to
the strategy of the configured ``processing_guarantee`` / ``pattern`` (``strategies/``:
which transactions wrap a batch, when its offsets commit; see guarantees.py and the
pattern modules for the steps). The handler is called once per record::

    def handle(record: Record, ctx: Context) -> None:
        ctx.tx.execute("INSERT INTO orders (id, total) VALUES (?, ?)", (...))
        ctx.produce("order-events", key=record.key, value=b"...")

``ctx.tx`` is the database transaction (None without a database); ``ctx.produce`` goes into
the Kafka transaction (kafka_transactions), into the outbox (``outbox=True``) or to an
idempotent producer flushed before the offsets are committed (otherwise). With
``commit_interval_ms`` the batches of that interval share one transaction or one offset
commit (runner_pending.py holds what they span).

Consumer controls: ``subscribe`` (consumer groups) or manual ``assign``
(runner_assignment.py); ``seek`` to the database offsets (db_offsets) and back to a
batch's start after an error; ``pause`` a partition whose database lock timed out and
``resume`` it after a backoff; commits sync or async (runner_consumer.py). SIGTERM (or
``stop()``) ends the loop after the current batch. A record whose value cannot be
decoded, or whose handler keeps failing, goes to the dead-letter topic with the error in
its headers, inside the batch's transaction where one is used (runner_work.py).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from onceflow.client_errors import is_fatal
from onceflow.crash_points import CrashPoints
from onceflow.db import Database, connect
from onceflow.patterns.runner_assignment import PartitionAssignment
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_consumer import RunnerConsumer
from onceflow.patterns.runner_output import BatchOutput
from onceflow.patterns.runner_progress import Progress, RunStats
from onceflow.patterns.runner_work import BatchWork, Context, Handler, HandlerFailed
from onceflow.patterns.starting_offsets import StartingOffsets
from onceflow.patterns.strategies import RunnerParts, Strategy, open_strategy
from onceflow.patterns.transactional import batch_start_offsets
from onceflow.patterns.worker_identity import (
    REJOIN_AFTER_S,
    InstanceStillInGroup,
    group_instance_id,
    previous_incarnation_holds,
    still_in_group,
)

__all__ = ["Context", "Handler", "RunStats", "Runner", "RunnerConfig"]

log = logging.getLogger(__name__)


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

    def stop(self) -> None:
        """Finish the current batch, commit, leave the group and return from run()."""
        self._stop.set()

    def run(self) -> RunStats:
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: self.stop())
        try:
            while True:
                try:
                    with self._opened() as (parts, strategy):
                        self._loop(parts, strategy)
                    break
                except InstanceStillInGroup as held:
                    log.warning("%s: joining again in %.0f s", held, REJOIN_AFTER_S)
                    if self._stop.wait(REJOIN_AFTER_S):
                        break
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return self.stats

    # -- setup ------------------------------------------------------------------------

    @contextmanager
    def _opened(self) -> Iterator[tuple[RunnerParts, Strategy]]:
        """The consumer, the database, the strategy (its tables, its producer) and the
        partitions; closed in the reverse order: the consumer first (leaving the group),
        then the producers, then the database."""
        c = self.config
        consumer = RunnerConsumer(Consumer(consumer_settings(c)), c, self.progress, self.stats)
        output = BatchOutput(c.bootstrap_servers, c.producer_config)
        db: Database | None = None
        assignment: PartitionAssignment | None = None
        try:
            if c.database_url is not None:
                db = connect(
                    c.database_url,
                    lock_timeout_ms=c.lock_timeout_ms,
                    statement_timeout_ms=c.statement_timeout_ms,
                )
            work = BatchWork(self.handler, c, output, self.stats, db)
            parts = RunnerParts(c, consumer, work, output, self.crash, self.stats)
            strategy = open_strategy(self.plan, parts, db)
            output.start_direct()
            starts = StartingOffsets(consumer.client, c, strategy.offset_store, self.crash)
            assignment = PartitionAssignment(consumer, strategy, starts, c)
            assignment.start()
            yield parts, strategy
        finally:
            if assignment is not None:
                assignment.closing = True
            consumer.close()
            output.close()
            if db is not None:
                db.close()

    # -- running ----------------------------------------------------------------------

    def _loop(self, parts: RunnerParts, strategy: Strategy) -> None:
        consumer, progress = parts.consumer, self.progress
        while not self._stop.is_set():
            consumer.resume_due()
            progress.tick(consumer.client)
            messages = consumer.next_batch()
            errors = [message.error() for message in messages]
            if any(errors):  # events (EOF) or errors: rare
                messages = self._records_of(messages, errors)
            elif progress.at_end:  # records of partitions read to their end
                for message in messages:
                    progress.consumed((message.topic(), message.partition()))
            progress.counted(len(messages))
            if not messages:
                strategy.commit_pending()  # nothing more came: do not hold outputs back
                idle = progress.idle_for(paused=consumer.any_paused)
                if self.config.idle_exit_s is not None and idle > self.config.idle_exit_s:
                    log.info("idle for %.1f s with no lag: stopping (idle_exit_s)", idle)
                    break
                continue
            self.crash.reached("after_consume")
            self.stats.batches += 1
            self._process(parts, strategy, messages)
            progress.measure_lag(consumer.client)
        strategy.commit_pending()  # stopped: what was processed is committed before leaving

    def _records_of(
        self, messages: list[Message], errors: list[KafkaError | None]
    ) -> list[Message]:
        """The data messages of a batch; its events and errors acted on, in order."""
        progress, records = self.progress, []
        for message, error in zip(messages, errors, strict=True):
            if error is None:
                records.append(message)
                progress.consumed((message.topic(), message.partition()))
            elif error.code() == KafkaError._PARTITION_EOF:
                progress.reached_end((message.topic(), message.partition()))
            elif previous_incarnation_holds(error):
                raise still_in_group(self.config)
            elif is_fatal(error):
                raise KafkaException(error)
            else:
                log.warning("consumer: %s", error)
        return records

    def _process(self, parts: RunnerParts, strategy: Strategy, messages: list[Message]) -> None:
        try:
            strategy.process(messages)
        except HandlerFailed as failure:
            starts = failure.starts or batch_start_offsets(messages)
            attempts = parts.work.failed(failure)
            if not strategy.rewinds_failed_batches:
                return  # at_most_once: already committed, never processed again
            self.stats.retries += 1
            parts.consumer.rewind_to(starts)
            time.sleep(min(self.config.retry_backoff_s * attempts, 5.0))


def consumer_settings(config: RunnerConfig) -> dict[str, Any]:
    """The Runner's consumer: read_committed, offsets committed by the Runner only, a
    static member when it has a worker_id."""
    instance = group_instance_id(config)
    return {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": config.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "max.poll.interval.ms": config.max_poll_interval_ms,
        # librdkafka stops fetching for fetch.queue.backoff.ms (1000 ms by default)
        # whenever its prefetch queue holds more than queued.min.messages (100,000):
        # a Runner working through a backlog of small records then waits about a
        # second after every 100,000. Fetch again as soon as the queue has room.
        "fetch.queue.backoff.ms": 20,
        **config.consumer_config,
        **({"group.instance.id": instance} if instance is not None else {}),
        "enable.partition.eof": True,  # tells when the Runner has caught up
    }
