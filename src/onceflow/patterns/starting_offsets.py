"""Where the Runner starts reading each partition it is given.

Without db_offsets: the group's committed offset, or auto.offset.reset's end. With
db_offsets: the partition rows are locked first (waiting, bounded, for the previous owner's
transaction to end), and each partition starts at max(database, Kafka), seeking when the
two differ.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

from onceflow.crash_points import CrashPoints
from onceflow.db import LockTimeout
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.runner_config import RunnerConfig

log = logging.getLogger(__name__)
TP = tuple[str, int]


class StartingOffsets:
    def __init__(
        self,
        consumer: Consumer,
        config: RunnerConfig,
        offsets: OffsetStore | None,
        crash: CrashPoints,
    ) -> None:
        self.consumer = consumer
        self.config = config
        self.offsets = offsets
        self.crash = crash

    @property
    def from_database(self) -> bool:
        """Partitions start at the database's offsets (db_offsets), not the group's."""
        return self.offsets is not None

    def assignment(self, partitions: list[TP]) -> list[TopicPartition]:
        """``partitions`` with their start offsets: Kafka's committed ones, or with db_offsets
        (steps 1-2) max(database, Kafka) per partition."""
        if self.offsets is None:
            committed = self.kafka_committed(partitions)
            return [
                TopicPartition(t, p, self._or_reset(committed.get((t, p)))) for t, p in partitions
            ]
        deadline = time.monotonic() + self.config.max_poll_interval_ms / 2000
        while True:  # block (bounded) until the previous owner's transaction has ended
            try:
                starts = self.offsets.start_offsets(
                    partitions,
                    self.kafka_committed,
                    on_locked=lambda: self.crash.reached("after_lock_assignment"),
                )
                break
            except LockTimeout:
                if time.monotonic() > deadline:
                    raise
                log.info("partition rows still locked by the previous owner; waiting")
        assignment = []
        for start in starts:
            offset = start.offset
            if start.mismatch and offset is not None:
                log.info(
                    "%s[%d]: database offset %s, Kafka offset %s: seeking to %d",
                    start.topic, start.partition, start.database, start.kafka, offset,
                )  # fmt: skip
            assignment.append(TopicPartition(start.topic, start.partition, self._or_reset(offset)))
        self.crash.reached("after_seek")
        return assignment

    def _or_reset(self, offset: int | None) -> int:
        """An explicit start offset: the known one, else auto.offset.reset's end.

        Never OFFSET_STORED: the committed offset was already asked for (and librdkafka
        2.x crashes on assign() with stored offsets when the broker has no group
        coordinator).
        """
        if offset is not None:
            return offset
        reset = str(self.config.consumer_config.get("auto.offset.reset", "earliest")).lower()
        return OFFSET_END if reset in ("latest", "largest", "end") else OFFSET_BEGINNING

    def kafka_committed(self, partitions: list[TP]) -> dict[TP, int | None]:
        try:
            committed = self.consumer.committed(
                [TopicPartition(t, p) for t, p in partitions],
                timeout=self.config.committed_timeout_s,
            )
        except KafkaException as error:
            log.warning("cannot read Kafka committed offsets (using the database's): %s", error)
            return dict.fromkeys(partitions)
        return {
            (tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in committed
        }
