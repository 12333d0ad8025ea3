"""The Runner's consumer: its batches, offset commits, rewinds and paused partitions.

One place for what every strategy does to the consumer: commit offsets of the partitions it
still owns, seek partitions back to a batch's start, and pause the partitions of a batch
whose database work failed for ``retry_backoff_s`` (resumed by the loop).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from onceflow.db import DatabaseError
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_progress import Progress, RunStats
from onceflow.patterns.transactional import batch_start_offsets, rewind

log = logging.getLogger("onceflow.patterns.runner")
TP = tuple[str, int]


class RunnerConsumer:
    def __init__(
        self, client: Consumer, config: RunnerConfig, progress: Progress, stats: RunStats
    ) -> None:
        self.client = client
        self.config = config
        self.progress = progress
        self.stats = stats
        self._paused: dict[TP, float] = {}  # partition -> when to resume it
        self._commit_warned = False

    def owns(self, tp: TP) -> bool:
        return tp in self.progress.owned

    def is_paused(self, tp: TP) -> bool:
        return tp in self._paused

    @property
    def any_paused(self) -> bool:
        return bool(self._paused)

    def next_batch(self) -> list[Message]:
        """Wait up to poll_timeout_s for a first event, then take what else is already
        fetched, up to batch_size, as Kafka's poll() does. (consume(batch_size, timeout)
        would wait for a full batch, or the whole timeout for the last records of a burst.)"""
        first = self.client.poll(self.config.poll_timeout_s)
        if first is None:
            return []
        if self.config.batch_size == 1:
            return [first]
        return [first, *self.client.consume(self.config.batch_size - 1, 0)]

    def commit(self, offsets: dict[TP, int], synchronous: bool) -> bool:
        """Commit the offsets of the partitions still owned; False when none was committed."""
        owned = [TopicPartition(t, p, o) for (t, p), o in offsets.items() if self.owns((t, p))]
        if not owned:
            return False
        try:
            self.client.commit(offsets=owned, asynchronous=not synchronous)
            return True
        except KafkaException as error:
            self.stats.commit_failures += 1
            if not self._commit_warned:
                log.warning("offset commit failed (will be retried by the next batch): %s", error)
                self._commit_warned = True
            return False

    def rewind(self, messages: list[Message]) -> None:
        self.rewind_to(batch_start_offsets(messages))

    def rewind_to(self, offsets: dict[TP, int]) -> None:
        rewind(self.client, offsets)
        self.progress.rewound(offsets)

    def back_off(self, starts: dict[TP, int], error: DatabaseError) -> None:
        """After a database error (the transaction is rolled back): rewind, and pause the
        batch's partitions for a backoff."""
        log.warning("database error, batch rolled back and paused: %s", error)
        self.stats.retries += 1
        self.rewind_to(starts)
        tps = set(starts)
        self.client.pause([TopicPartition(t, p) for t, p in tps])
        resume_at = time.monotonic() + self.config.retry_backoff_s
        for tp in tps:
            self._paused[tp] = resume_at

    def resume_due(self) -> None:
        if not self._paused:
            return
        now = time.monotonic()
        due = [tp for tp, at in self._paused.items() if at <= now]
        if due:
            self.client.resume([TopicPartition(t, p) for t, p in due])
            for tp in due:
                del self._paused[tp]

    def forget(self, partitions: list[TopicPartition]) -> None:
        """Partitions revoked or lost: no longer owned, nothing to resume."""
        self.progress.revoked((tp.topic, tp.partition) for tp in partitions)
        for tp in partitions:
            self._paused.pop((tp.topic, tp.partition), None)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as error:  # already closed / broker gone: nothing to lose
            log.debug("consumer close: %s", error)
