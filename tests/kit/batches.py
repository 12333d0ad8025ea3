"""Record batches, the one way the tests build and read them: a v2 batch as a producer
sends it (base offset 0, CRC-32C checked), and fetched record sets decoded as
(offset, value) pairs or as plain data for comparison."""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Sequence
from typing import Any

import crc32c
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

CRC_START = 21  # the CRC-32C covers the batch from its attributes field to the end
LOG_APPEND_TIME = 0x08  # batch attribute bits
TRANSACTIONAL = 0x10
CONTROL = 0x20
Headers = tuple[tuple[bytes, bytes | None], ...]


def record_batch(
    values: list[bytes | None],
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int | None = None,
    keys: list[bytes | None] | None = None,
    transactional: bool = False,
    headers: Headers = (),
    timestamp_step_ms: int = 0,
    record_headers: Sequence[Headers] | None = None,
) -> bytes:
    """A v2 batch as a producer sends it. The n-th record's timestamp is ``timestamp_ms``
    (now by default) + n * ``timestamp_step_ms``; it carries ``record_headers[n]`` if
    given, else ``headers``."""
    base = datetime.datetime.now(datetime.UTC)
    if timestamp_ms is not None:
        base = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    step = datetime.timedelta(milliseconds=timestamp_step_ms)
    keys = keys or [None] * len(values)
    per_record = list(record_headers) if record_headers is not None else [headers] * len(values)
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(TRANSACTIONAL if transactional else 0),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=TZAwareMicros.parse(base + index * step),
                offset=i64(index),
                key=key,
                value=value,
                headers=tuple(RecordHeader(key=k, value=v) for k, v in per_record[index]),
            )
            for index, (key, value) in enumerate(zip(keys, values, strict=True))
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    data = buffer.getvalue()
    (crc,) = struct.unpack_from(">I", data, 17)
    assert crc == crc32c.crc32c(data[CRC_START:]), "kio wrote a batch with a wrong CRC"
    return data


def _whole_batches(data: bytes) -> tuple[list[tuple[int, int]], int]:
    """(position, size) of every whole batch of a record set, and the bytes of a trailing
    partial batch (a fetch cut by its size limit)."""
    batches = []
    position = 0
    while position < len(data):
        if position + 12 > len(data):
            break
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        if position + size > len(data):
            break
        batches.append((position, size))
        position += size
    return batches, len(data) - position


def decode(records: bytes | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set (CRC-checked by kio)."""
    data = records or b""
    out = []
    for position, _ in _whole_batches(data)[0]:
        batch, _ = read_batch(data, position)
        out += [(record.offset, record.value) for record in batch.records]
    return out


def decode_batches(data: bytes | None) -> list[dict[str, Any]] | None:
    """Every whole batch of a record set as a dict (times the broker set read
    ``"<time>"``); a trailing partial batch as ``{"partial_bytes": n}``."""
    if data is None:
        return None
    batches, partial = _whole_batches(data)
    out: list[dict[str, Any]] = [_as_dict(read_batch(data, p)[0]) for p, _ in batches]
    if partial:
        out.append({"partial_bytes": partial})
    return out


def _as_dict(batch: Any) -> dict[str, Any]:
    attributes = int(batch.attributes)
    broker_time = bool(attributes & (CONTROL | LOG_APPEND_TIME))
    return {
        "base_offset": int(batch.base_offset),
        "last_offset_delta": int(batch.last_offset_delta),
        "partition_leader_epoch": int(batch.partition_leader_epoch),
        "attributes": attributes,
        "base_timestamp": "<time>" if broker_time else int(batch.base_timestamp),
        "max_timestamp": "<time>" if broker_time else int(batch.max_timestamp),
        "producer_id": int(batch.producer_id),
        "producer_epoch": int(batch.producer_epoch),
        "base_sequence": int(batch.base_sequence),
        "records": [
            {
                "offset": int(record.offset),
                "timestamp": "<time>" if broker_time else int(record.timestamp.timestamp() * 1000),
                "key": record.key,
                "value": record.value,
                "headers": [(h.key, h.value) for h in record.headers],
            }
            for record in batch.records
        ],
    }
