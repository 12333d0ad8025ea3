"""The read side of a partition's log: fetches (up to the high watermark, or the last
stable offset under read_committed, with the aborted transactions in range), replays of
its batches and offset lookups by timestamp.

A damaged batch found on the way takes the partition offline (``PartitionStatus``):
nothing is served from it any more, not even the batches before the damage.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from onceflow.log import segment_reads, timestamp_lookup
from onceflow.log.batch import BatchHeader, parse_header
from onceflow.log.partition_durability import Durability
from onceflow.log.partition_status import PartitionStatus
from onceflow.log.segment import SegmentDamaged
from onceflow.log.segment_list import SegmentList
from onceflow.log.transaction_index import TransactionIndex
from onceflow.log.txn_index import AbortedTxn
from onceflow.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class ReadResult:
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


@dataclass(slots=True, eq=False)
class PartitionReads:
    segments: SegmentList
    status: PartitionStatus
    durability: Durability
    transactions: TransactionIndex

    def read(self, offset: int, max_bytes: int, read_committed: bool) -> ReadResult:
        self.status.require_online(reading=True)
        segments = self.segments
        high_watermark = self.durability.high_watermark
        stable = self.transactions.last_stable_offset
        if offset < segments.log_start_offset or offset > segments.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} is outside [{segments.log_start_offset}, "
                f"{segments.log_end_offset}]",
            )
        upper = stable if read_committed else high_watermark
        records = b""
        end_offset = offset
        if offset < upper:
            records, end_offset = self._read_range(offset, upper, max_bytes)
        aborted = None
        if read_committed:
            aborted = self.transactions.aborted_between(offset, end_offset) if records else []
        return ReadResult(records, high_watermark, stable, segments.log_start_offset, aborted)

    def _read_range(self, offset: int, upper: int, max_bytes: int) -> tuple[bytes, int]:
        """The batches from ``offset`` below ``upper`` (at least one, up to ``max_bytes``)
        and the offset after them; a damaged batch takes the partition offline."""
        start = self.segments.index_for(offset)
        try:
            found = segment_reads.read_range(
                self.segments.segments[start:], offset, upper, max_bytes
            )
        except SegmentDamaged as damage:
            raise self.status.found_damage(damage, "a fetch") from None
        if found is None:
            return b"", offset
        damage = segment_reads.first_damage(found.data, found.first_offset)
        if damage is None:
            return found.data, found.end_offset
        problem, at = damage
        path = found.segment.log_path
        raise self.status.found_damage(
            SegmentDamaged(problem, path, found.position + at), "a fetch"
        )

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        """Yield (header, batch bytes) for every batch from ``start_offset`` (replay)."""
        self.status.require_online()
        offset = self.segments.log_start_offset if start_offset is None else start_offset
        try:
            for segment in self.segments.segments:
                if segment.next_offset <= offset:
                    continue
                for header in segment.headers_from(offset):
                    data = segment.read(header.position, header.size)
                    yield parse_header(data), data
        except SegmentDamaged as damage:
            raise self.status.found_damage(damage, "a replay") from None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        self.status.require_online()
        segments = self.segments
        try:
            return timestamp_lookup.offset_for_timestamp(
                segments.segments, segments.log_start_offset, timestamp
            )
        except SegmentDamaged as damage:
            raise self.status.found_damage(damage, "a lookup by time") from None

    def legacy_offsets_before(self, timestamp: int, max_count: int) -> list[int]:
        self.status.require_online()
        segments = self.segments
        return timestamp_lookup.legacy_offsets_before(
            segments.segments,
            segments.log_start_offset,
            segments.log_end_offset,
            timestamp,
            max_count,
        )

    def offset_of_max_timestamp(self) -> tuple[int, int]:
        self.status.require_online()
        return timestamp_lookup.offset_of_max_timestamp(self.segments.segments)
