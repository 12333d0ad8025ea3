"""Time and size retention (``cleanup.policy=delete``) and DeleteRecords: which old
segments go, and deleting them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.clock import now_ms
from onceflow.config import TopicConfig
from onceflow.log.partition_durability import Durability
from onceflow.log.partition_status import PartitionStatus
from onceflow.log.producer_state import ProducerStateManager
from onceflow.log.segment import LogSegment, OffsetRules
from onceflow.log.segment_list import SegmentList
from onceflow.log.tail_recovery import damage_reason
from onceflow.log.transaction_index import TransactionIndex
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def expired_segments(
    segments: Sequence[LogSegment], config: TopicConfig, high_watermark: int, now_ms: int
) -> list[bool]:
    """The oldest segments retention.ms / retention.bytes delete, in order: for each,
    whether only its timestamps condemn it (retention.ms; retention.bytes would keep it).
    Never the active segment, nor one holding offsets at or above the high watermark."""
    if "delete" not in str(config["cleanup.policy"]).split(","):
        return []
    retention_ms = config["retention.ms"]
    retention_bytes = config["retention.bytes"]
    remaining = sum(segment.size for segment in segments)
    doomed: list[bool] = []
    for oldest in segments[:-1]:
        if oldest.next_offset > high_watermark:
            break
        expired = (
            retention_ms >= 0
            and oldest.max_timestamp >= 0
            and now_ms - oldest.max_timestamp > retention_ms
        )
        oversized = retention_bytes >= 0 and remaining - oldest.size >= retention_bytes
        if not (expired or oversized):
            break
        remaining -= oldest.size
        doomed.append(not oversized)
    return doomed


@dataclass(slots=True, eq=False)
class Retention:
    """Deletes a partition's old segments: retention.ms / retention.bytes, and
    DeleteRecords (which moves the log start offset first, durably)."""

    segments: SegmentList
    status: PartitionStatus
    durability: Durability
    transactions: TransactionIndex
    producers: ProducerStateManager

    def delete_records_before(self, offset: int) -> int:
        self.status.require_online()
        high_watermark = self.durability.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot delete records up to {offset}: high watermark is {high_watermark}",
            )
        segments = self.segments
        if offset > segments.log_start_offset:
            try:  # durable first: records a restart would bring back stay visible until then
                segments.write_checkpoint(offset)
            except OSError as error:
                log.error("%s: cannot record the new log start offset: %s", self.status.name, error)
                raise KafkaError(
                    ErrorCode.kafka_storage_error, f"cannot delete records: {error}"
                ) from None
            segments.log_start_offset = offset
            while len(segments.segments) > 1 and segments.segments[1].base_offset <= offset:
                self._delete_oldest()
        return segments.log_start_offset

    def enforce(self) -> int:
        """Delete old segments per retention.ms / retention.bytes; return how many.

        An offline partition keeps every byte for the operator. A segment condemned by its
        timestamps alone is checked first (CRCs and headers): its timestamps are not
        CRC-checked below the recovery point, and a flipped one can make a segment look
        old; damage found takes the partition offline and deletes nothing.
        """
        if self.status.offline:
            return 0
        segments = self.segments
        doomed = expired_segments(
            segments.segments, segments.config, self.durability.high_watermark, now_ms()
        )
        for count, by_time in enumerate(doomed):
            oldest, following = segments.segments[:2]
            if by_time and not self._sound_before_deleting(oldest, following.base_offset):
                return count
            self._delete_oldest()
        return len(doomed)

    def _delete_oldest(self) -> None:
        self.segments.delete_oldest()
        self.durability.segments_changed()
        start = self.segments.log_start_offset
        self.transactions.drop_before(start)
        self.producers.drop_before(start)

    def _sound_before_deleting(self, segment: LogSegment, limit: int) -> bool:
        scan = segment.scan(0, OffsetRules(gaps_allowed=segment.gaps_allowed, limit=limit))
        if scan.problem is None:
            return True
        self.status.go_offline(
            damage_reason(
                scan.reason or scan.problem,
                segment.log_path,
                scan.problem_at,
                "before deleting the segment by time (retention.ms)",
                "its timestamps cannot be trusted, so nothing was deleted, and acknowledged "
                "data is damaged; this partition serves nothing until repaired",
            ),
            damaged=True,
        )
        return False
