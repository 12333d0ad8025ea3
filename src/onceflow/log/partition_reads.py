"""The read side of a partition's log, which ``PartitionLog`` mixes in: fetches (up to the
high watermark, or the last stable offset under read_committed, with the aborted
transactions in range) and offset lookups by timestamp.

A fetch of a partition offline because its stored data is damaged answers CORRUPT_MESSAGE,
as Kafka answers a fetch that reaches a corrupt batch: clients report it (librdkafka's
consumer as a poll() error, the Java consumer as a KafkaException) where they would retry
KAFKA_STORAGE_ERROR in silence. Nothing is served, not even the batches before the damage.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from onceflow.log import segment_reads, timestamp_lookup
from onceflow.log.segment import LogSegment, SegmentDamaged
from onceflow.log.tail_recovery import damage_reason
from onceflow.log.txn_index import AbortedTxn
from onceflow.protocol.errors import ErrorCode, KafkaError


def base_offset(segment: LogSegment) -> int:
    return segment.base_offset


@dataclass(slots=True)
class ReadResult:
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


class PartitionReads:
    """Reads over the log's state. ``PartitionLog`` provides these attributes, and the
    methods ``require_online`` and ``_go_offline``."""

    name: str
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[AbortedTxn]  # sorted by last_offset
    offline: str | None
    damaged: bool

    def read(self, offset: int, max_bytes: int, read_committed: bool) -> ReadResult:
        self.require_online(reading=True)
        high_watermark = self.high_watermark
        stable = self.last_stable_offset
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]",
            )
        upper = stable if read_committed else high_watermark
        records = b""
        end_offset = offset
        if offset < upper:
            records, end_offset = self._read_range(offset, upper, max_bytes)
        aborted = None
        if read_committed:
            aborted = self.aborted_between(offset, end_offset) if records else []
        return ReadResult(records, high_watermark, stable, self.log_start_offset, aborted)

    def _read_range(self, offset: int, upper: int, max_bytes: int) -> tuple[bytes, int]:
        """The batches from ``offset`` below ``upper`` (at least one, up to ``max_bytes``)
        and the offset after them; a damaged batch takes the partition offline."""
        start = max(bisect.bisect_right(self.segments, offset, key=base_offset) - 1, 0)
        try:
            found = segment_reads.read_range(self.segments[start:], offset, upper, max_bytes)
        except SegmentDamaged as damage:
            raise self.found_damage(damage, "a fetch") from None
        if found is None:
            return b"", offset
        damage = segment_reads.first_damage(found.data, found.first_offset)
        if damage is None:
            return found.data, found.end_offset
        problem, at = damage
        path = found.segment.log_path
        raise self.found_damage(SegmentDamaged(problem, path, found.position + at), "a fetch")

    def found_damage(self, damage: SegmentDamaged, doing: str) -> KafkaError:
        """Take the partition offline for damage found on disk; the error to answer."""
        self._go_offline(
            damage_reason(
                damage.problem,
                damage.path,
                damage.position,
                f"while serving {doing}",
                "acknowledged data is damaged; this partition serves nothing until repaired",
            ),
            damaged=True,
        )
        return KafkaError(
            ErrorCode.corrupt_message, f"partition {self.name} is offline: {self.offline}"
        )

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping the offsets [start, end)."""
        keys = [txn.last_offset for txn in self.aborted]
        first = bisect.bisect_left(keys, start)
        return [txn for txn in self.aborted[first:] if txn.first_offset < end]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        self.require_online()
        try:
            return timestamp_lookup.offset_for_timestamp(
                self.segments, self.log_start_offset, timestamp
            )
        except SegmentDamaged as damage:
            raise self.found_damage(damage, "a lookup by time") from None

    def legacy_offsets_before(self, timestamp: int, max_count: int) -> list[int]:
        self.require_online()
        return timestamp_lookup.legacy_offsets_before(
            self.segments, self.log_start_offset, self.log_end_offset, timestamp, max_count
        )

    def offset_of_max_timestamp(self) -> tuple[int, int]:
        self.require_online()
        return timestamp_lookup.offset_of_max_timestamp(self.segments)
