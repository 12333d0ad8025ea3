"""Each record's offset, timestamp and whether it has a key, read from one v2 batch.

Only the fixed prefix of every record (length, attributes, timestamp delta, offset delta,
key length) is decoded; values and headers are skipped. Uncompressed and gzip batches are
read (gzip with the standard library); other codecs answer None and callers fall back to
the batch header.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from onceflow.log.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    BatchHeader,
)

NO_COMPRESSION, GZIP = 0, 1


@dataclass(frozen=True, slots=True)
class RecordEntry:
    index: int  # position in the batch (Kafka's batch_index)
    offset: int
    timestamp: int
    has_key: bool


def record_entries(
    batch: bytes | bytearray | memoryview, header: BatchHeader
) -> list[RecordEntry] | None:
    """The records of ``batch`` (one whole batch, from its first byte), or None if unreadable."""
    codec = header.attributes & ATTR_COMPRESSION_MASK
    body = bytes(memoryview(batch)[HEADER_SIZE : header.size])
    if codec == GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error):
            return None
    elif codec != NO_COMPRESSION:
        return None
    append_time = bool(header.attributes & ATTR_LOG_APPEND_TIME)
    entries = []
    position = 0
    try:
        for index in range(header.records_count):
            length, size = read_signed_varint(body, position)
            start = position + size
            cursor = start + 1  # attributes
            timestamp_delta, size = read_signed_varlong(body, cursor)
            cursor += size
            offset_delta, size = read_signed_varint(body, cursor)
            cursor += size
            key_length, _ = read_signed_varint(body, cursor)
            timestamp = (
                header.max_timestamp if append_time else header.base_timestamp + timestamp_delta
            )
            entries.append(
                RecordEntry(index, header.base_offset + offset_delta, timestamp, key_length >= 0)
            )
            position = start + length
    except DecodeError:
        return None
    if position != len(body):
        return None
    return entries
