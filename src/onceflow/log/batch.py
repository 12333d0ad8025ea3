"""Kafka v2 record batches handled as opaque bytes.

Only the 61-byte batch header is ever parsed on the broker's hot path; the records
inside pass through untouched. The CRC-32C covers everything from the attributes field to
the end of the batch, so the base offset and partition leader epoch can be patched in
place without recomputing it.
"""

from __future__ import annotations

import datetime
import io
import struct
from dataclasses import dataclass

import crc32c
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from onceflow.protocol.errors import ErrorCode, KafkaError

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21  # attributes begin here; the CRC covers [21, end)
MAX_TIMESTAMP_AT = 35
ATTRIBUTES_AT = 21

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

Bytes = bytes | bytearray | memoryview  # what the log appends and writes

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    length: int  # bytes after the length field
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0  # byte position of the batch in its buffer or segment

    @property
    def size(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 2**31


def parse_header(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    header = BatchHeader(*HEADER.unpack_from(data, position))
    header.position = position
    return header


def iter_headers(data: bytes | bytearray | memoryview, start: int = 0, stop: int | None = None):
    """Yield the headers of the complete batches in ``data[start:stop]``."""
    end = len(data) if stop is None else stop
    position = start
    while position + HEADER_SIZE <= end:
        header = parse_header(data, position)
        if header.length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            return
        yield header
        position += header.size


# This single broker stamps every batch it stores with leader epoch 0 (Metadata answers
# epoch 0); a client-side tool may have left -1. Anything else is damage: clients use the
# stored epoch to validate their positions (KIP-320), so a wrong one is not harmless.
MIN_STORED_LEADER_EPOCH = -1
MAX_STORED_LEADER_EPOCH = 0
MAX_RELATIVE_OFFSET = 2**31 - 1  # an index entry's offset is an int32 from the segment base


def stored_header_problem(
    header: BatchHeader, expected_offset: int, gaps_allowed: bool
) -> str | None:
    """Why a stored batch's header cannot be what the broker wrote, or None.

    Checks the fields the CRC does not cover (magic, length, base offset, leader epoch)
    against each other and against the offset the batch must start at, the end of the
    batch before it (or its segment's base offset). ``gaps_allowed``: compaction may have
    removed batches (and records inside a batch), so offsets need only increase.
    """
    if header.magic != 2:
        return f"batch with magic {header.magic}"
    if header.length < HEADER_SIZE - LOG_OVERHEAD:
        return f"batch with length {header.length}"
    delta, count = header.last_offset_delta, header.records_count
    if delta < 0 or count < 0 or count > delta + 1 or (count != delta + 1 and not gaps_allowed):
        return f"batch with {count} records but last offset delta {delta}"
    base = header.base_offset
    if base != expected_offset and not (gaps_allowed and base > expected_offset):
        return f"batch with offset {base} where offset {expected_offset} was expected"
    if not MIN_STORED_LEADER_EPOCH <= header.leader_epoch <= MAX_STORED_LEADER_EPOCH:
        return f"batch at offset {base} with partition leader epoch {header.leader_epoch}"
    return None


def validate_produce_records(data: bytes, max_message_bytes: int) -> BatchHeader:
    """Check what a producer sent for one partition: exactly one valid v2 batch.

    Raises KafkaError with the code Kafka's broker answers in the same situation.
    """
    if len(data) < HEADER_SIZE:
        raise KafkaError(ErrorCode.corrupt_message, "record set shorter than a batch header")
    header = parse_header(data)
    if header.magic != 2:
        raise KafkaError(
            ErrorCode.unsupported_for_message_format,
            f"record batch magic {header.magic} is not supported; only v2 batches are",
        )
    if header.length < HEADER_SIZE - LOG_OVERHEAD or header.size > len(data):
        raise KafkaError(ErrorCode.corrupt_message, "record batch length does not match data")
    if header.size != len(data):
        raise KafkaError(
            ErrorCode.invalid_record, "a produce request must carry exactly one batch per partition"
        )
    if header.size > max_message_bytes:
        raise KafkaError(
            ErrorCode.message_too_large,
            f"batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}",
        )
    if crc32c.crc32c(memoryview(data)[CRC_START:]) != header.crc:
        raise KafkaError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise KafkaError(ErrorCode.invalid_record, "record count does not match last offset delta")
    if header.is_control:
        raise KafkaError(ErrorCode.invalid_record, "clients may not produce control batches")
    if header.is_transactional and not header.has_producer_id:
        raise KafkaError(ErrorCode.invalid_record, "transactional batch without a producer id")
    return header


def check_crc(data: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    start = header.position + CRC_START
    end = header.position + header.size
    return crc32c.crc32c(memoryview(data)[start:end]) == header.crc


def assign_offset(data: bytes, base_offset: int, leader_epoch: int = 0) -> bytearray:
    """Return a copy of one batch with its base offset and leader epoch set."""
    patched = bytearray(data)
    patched[: PATCHED_PREFIX.size] = offset_prefix(data, base_offset, leader_epoch)
    return patched


PATCHED_PREFIX = struct.Struct(">qii")  # base offset, batch length, leader epoch


def offset_prefix(data: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """The first 16 bytes of one batch with its base offset and leader epoch set.

    Written followed by ``data[16:]`` (unchanged, the CRC does not cover the prefix), it
    stores the batch at its offset without copying the records.
    """
    return PATCHED_PREFIX.pack(base_offset, len(data) - LOG_OVERHEAD, leader_epoch)


def set_log_append_time(patched: bytearray, timestamp_ms: int) -> None:
    """Stamp LogAppendTime into a batch; the attributes change, so the CRC is rebuilt."""
    attributes = struct.unpack_from(">h", patched, ATTRIBUTES_AT)[0] | ATTR_LOG_APPEND_TIME
    struct.pack_into(">h", patched, ATTRIBUTES_AT, attributes)
    struct.pack_into(">q", patched, MAX_TIMESTAMP_AT, timestamp_ms)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(memoryview(patched)[CRC_START:]))


# A control batch holds one record whose key is (version: int16, type: int16) and whose
# value is (version: int16, coordinator epoch: int32).
def build_control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    control_type: int,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    record = KeyValue(struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, coordinator_epoch))
    return build_batch(
        base_offset,
        [record],
        timestamp_ms,
        attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes | None
    value: bytes | None


def build_batch(
    base_offset: int,
    records: list[KeyValue],
    timestamp_ms: int,
    *,
    attributes: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
) -> bytes:
    """Encode an uncompressed batch (used for control batches and internal topics)."""
    stamp = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(NO_SEQUENCE),
        attributes=i16(attributes),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=TZAwareMicros.parse(stamp),
                offset=i64(base_offset + index),
                key=record.key,
                value=record.value,
                headers=(),
            )
            for index, record in enumerate(records)
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def read_key_values(data: bytes | bytearray | memoryview, header: BatchHeader) -> list[KeyValue]:
    """Decode the records of one uncompressed batch (internal topics, control batches)."""
    if header.attributes & ATTR_COMPRESSION_MASK:
        raise ValueError("compressed batches are not decoded by the broker")
    batch, _ = read_batch(
        bytes(memoryview(data)[header.position : header.position + header.size]), 0
    )
    return [KeyValue(record.key, record.value) for record in batch.records]


def control_type_of(data: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """The control type (CONTROL_ABORT or CONTROL_COMMIT) of a control batch."""
    (record,) = read_key_values(data, header)
    if record.key is None or len(record.key) < 4:
        return -1
    return struct.unpack_from(">h", record.key, 2)[0]


def coordinator_epoch_of(data: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """The coordinator epoch in a control batch's marker (-1 if the marker has none)."""
    (record,) = read_key_values(data, header)
    if record.value is None or len(record.value) < 6:
        return -1
    return struct.unpack_from(">i", record.value, 2)[0]
