"""Reading stored batches for a fetch: a byte range of whole batches, checked."""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.log.batch import check_crc, iter_headers
from onceflow.log.segment import LogSegment


def read_range(
    segments: Sequence[LogSegment], offset: int, upper: int, max_bytes: int
) -> tuple[LogSegment, int, bytes, int] | None:
    """The batches from ``offset`` below ``upper`` in the first segment holding any, up to
    ``max_bytes`` but at least one: (segment, byte position, bytes, next offset)."""
    for segment in segments:
        start = end = -1
        end_offset = offset
        for header in segment.headers_from(offset):
            if header.base_offset >= upper:
                break
            if start < 0:
                start = header.position
            elif header.position + header.size - start > max_bytes:
                break
            end = header.position + header.size
            end_offset = header.next_offset
        if start >= 0:
            return segment, start, segment.read(start, end - start), end_offset
        if segment.next_offset > offset:
            break
    return None


def first_damage(data: bytes) -> tuple[str, int] | None:
    """None if every batch in ``data`` is intact, else (problem, byte position)."""
    checked = 0
    for header in iter_headers(data):
        if not check_crc(data, header):
            return f"CRC mismatch in the batch at offset {header.base_offset}", checked
        checked = header.position + header.size
    if checked == len(data):
        return None
    return "a batch that does not parse", checked
