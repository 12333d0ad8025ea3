"""Reading stored batches for a fetch: a byte range of whole batches, checked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.log.batch import check_crc, iter_headers
from onceflow.log.segment import LogSegment


@dataclass(slots=True)
class StoredRange:
    """Whole batches read from one segment."""

    segment: LogSegment
    position: int  # of the first batch in the segment
    data: bytes
    first_offset: int  # the first batch's base offset
    end_offset: int  # the offset after the last batch


def read_range(
    segments: Sequence[LogSegment], offset: int, upper: int, max_bytes: int
) -> StoredRange | None:
    """The batches from ``offset`` below ``upper`` in the first segment holding any, up to
    ``max_bytes`` but at least one. Raises SegmentDamaged (from ``headers_from``)."""
    for segment in segments:
        start = end = first_offset = -1
        end_offset = offset
        for header in segment.headers_from(offset):
            if header.base_offset >= upper:
                break
            if start < 0:
                start = header.position
                first_offset = header.base_offset
            elif header.position + header.size - start > max_bytes:
                break
            end = header.position + header.size
            end_offset = header.next_offset
        if start >= 0:
            data = segment.read(start, end - start)
            return StoredRange(segment, start, data, first_offset, end_offset)
        if segment.next_offset > offset:
            break
    return None


def first_damage(data: bytes, first_offset: int) -> tuple[str, int] | None:
    """None if every batch in ``data`` is intact and at the offset its scan (which checked
    its header) found it at, else (problem, byte position)."""
    checked = 0
    expected = first_offset
    for header in iter_headers(data):
        if header.base_offset < expected:
            return f"batch with offset {header.base_offset} where {expected} was expected", checked
        if not check_crc(data, header):
            return f"CRC mismatch in the batch at offset {header.base_offset}", checked
        checked = header.position + header.size
        expected = header.next_offset
    if checked == len(data):
        return None
    return "a batch that does not parse", checked
