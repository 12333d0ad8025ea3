"""Finding offsets by time in a partition's segments (ListOffsets)."""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.clock import now_ms
from onceflow.log.batch import BatchHeader
from onceflow.log.record_index import record_entries
from onceflow.log.segment import LogSegment


def offset_for_timestamp(
    segments: Sequence[LogSegment], log_start_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """First record at or after the log start with timestamp >= ``timestamp``.

    Answers (offset, timestamp) of that record, as Kafka does; a batch whose records
    cannot be read here (a codec other than gzip) answers for its first offset.
    """
    for segment in segments:
        if segment.max_timestamp < timestamp:
            continue
        for header in segment.headers_for_timestamp(timestamp):
            if header.max_timestamp < timestamp or header.next_offset <= log_start_offset:
                continue
            entries = record_entries(segment.read(header.position, header.size), header)
            if entries is None:
                return max(header.base_offset, log_start_offset), header.max_timestamp
            for entry in entries:
                if entry.timestamp >= timestamp and entry.offset >= log_start_offset:
                    return entry.offset, entry.timestamp
    return None


def legacy_offsets_before(
    segments: Sequence[LogSegment],
    log_start_offset: int,
    log_end_offset: int,
    timestamp: int,
    max_count: int,
) -> list[int]:
    """ListOffsets v0: segment start offsets (and the log end) whose segment was last
    written at or before ``timestamp``, newest first, as Kafka's legacy lookup answers.

    -1 (latest) starts from the log end, -2 (earliest) from the log start.
    """
    candidates = [
        (max(segment.base_offset, log_start_offset), segment.last_modified_ms())
        for segment in segments
    ]
    if segments[-1].size > 0:
        candidates.append((log_end_offset, now_ms()))
    if timestamp == -1:
        start = len(candidates) - 1
    elif timestamp == -2:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    chosen = [candidates[index][0] for index in range(start, -1, -1)][: max(max_count, 0)]
    return sorted(chosen, reverse=True)


def offset_of_max_timestamp(segments: Sequence[LogSegment]) -> tuple[int, int]:
    """The first record holding the largest timestamp: (offset, timestamp), or (-1, -1)."""
    best: tuple[LogSegment, BatchHeader] | None = None
    for segment in segments:
        if best is None or segment.max_timestamp > best[1].max_timestamp:
            for header in segment.headers_from(segment.base_offset):
                if best is None or header.max_timestamp > best[1].max_timestamp:
                    best = (segment, header)
    if best is None:
        return -1, -1
    segment, header = best
    entries = record_entries(segment.read(header.position, header.size), header) or []
    for entry in entries:
        if entry.timestamp == header.max_timestamp:
            return entry.offset, entry.timestamp
    return header.last_offset, header.max_timestamp
