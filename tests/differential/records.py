"""Record batches the scenarios send (fixed timestamps, so both brokers store the same
bytes but for the producer id), and fetched record sets as plain data for comparison."""

from __future__ import annotations

import datetime
import io
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

BASE_TIME_MS = 1_700_000_000_000  # every record's timestamp, unless a step gives its own
TRANSACTIONAL = 0x10
CONTROL = 0x20
LOG_APPEND_TIME = 0x08


@dataclass(frozen=True)
class Batch:
    """A v2 batch; ``producer`` names the client whose producer id and epoch it carries
    (resolved on each broker from what that broker answered), or None."""

    values: tuple[bytes | None, ...]
    producer: str | None = None
    sequence: int = -1
    transactional: bool = False
    timestamp_ms: int = BASE_TIME_MS
    keys: tuple[bytes | None, ...] | None = None
    epoch_offset: int = 0  # add to the producer's epoch (a stale or future epoch)
    headers: tuple[tuple[bytes, bytes | None], ...] = field(default=())

    def encode(self, variables: dict[str, Any]) -> bytes:
        pid, epoch = -1, -1
        if self.producer is not None:
            pid = variables.get(f"{self.producer}.pid", -1)
            epoch = variables.get(f"{self.producer}.epoch", -1) + self.epoch_offset
        return encode_batch(
            list(self.values),
            pid,
            epoch,
            self.sequence,
            self.transactional,
            self.timestamp_ms,
            list(self.keys) if self.keys else None,
            self.headers,
        )


def encode_batch(
    values: list[bytes | None],
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp_ms: int = BASE_TIME_MS,
    keys: list[bytes | None] | None = None,
    headers: tuple[tuple[bytes, bytes | None], ...] = (),
) -> bytes:
    keys = keys or [None] * len(values)
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(TRANSACTIONAL if transactional else 0),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=TZAwareMicros.parse(
                    datetime.datetime.fromtimestamp((timestamp_ms + index) / 1000, datetime.UTC)
                ),
                offset=i64(index),
                key=key,
                value=value,
                headers=tuple(RecordHeader(key=k, value=v) for k, v in headers),
            )
            for index, (key, value) in enumerate(zip(keys, values, strict=True))
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def decode_batches(data: bytes | None) -> list[dict[str, Any]] | None:
    """Every whole batch of a record set as a dict; a trailing partial batch (a fetch cut
    by its size limit) as ``{"partial_bytes": n}``."""
    if data is None:
        return None
    out: list[dict[str, Any]] = []
    position = 0
    while position < len(data):
        if position + 12 > len(data):
            out.append({"partial_bytes": len(data) - position})
            break
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        if position + size > len(data):
            out.append({"partial_bytes": len(data) - position})
            break
        batch, _ = read_batch(data, position)
        attributes = int(batch.attributes)
        broker_time = bool(attributes & (CONTROL | LOG_APPEND_TIME))
        out.append(
            {
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
                        "timestamp": "<time>"
                        if broker_time
                        else int(record.timestamp.timestamp() * 1000),
                        "key": record.key,
                        "value": record.value,
                        "headers": [(h.key, h.value) for h in record.headers],
                    }
                    for record in batch.records
                ],
            }
        )
        position += size
    return out
