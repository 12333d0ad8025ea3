"""``onceflow log dump`` of a ``.log`` segment: a line per batch in Kafka's wording and,
with ``print_data_log``, a ``|``-prefixed line per record. A batch whose frame is sane is
shown whatever its CRC says (``isvalid: false``); bytes at the end that are not a whole
batch end the dump with a line saying where and how many."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kio.records.readers import read_record
from kio.serial.readers import read_int8, read_signed_varint, read_signed_varlong

from onceflow.log.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_LOG_APPEND_TIME,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    BatchHeader,
    check_crc,
    parse_header,
    stored_header_problem,
)
from onceflow.log.dump_lines import (
    RECORD_INDENT,
    DumpError,
    DumpLine,
    DumpOptions,
    base_offset_of,
)
from onceflow.log.record_decoders import RecordDecoder
from onceflow.log.segment import COMPACTED_MARKER

COMPRESSION_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT"}
CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
MAX_SEQUENCE = 2**31


# -- .log segments: reading batches -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredBatch:
    header: BatchHeader  # position: where the batch starts in the file
    data: bytes  # the whole batch
    valid: bool  # its CRC-32C matches


@dataclass(frozen=True, slots=True)
class UnreadTail:
    """Bytes at the end of a segment that are not a whole batch: a torn write or garbage."""

    position: int
    unread_bytes: int
    reason: str


@dataclass(frozen=True, slots=True)
class ByteLimitReached:
    position: int
    unread_bytes: int
    max_bytes: int


def read_batches(
    path: Path, max_bytes: int | None = None
) -> Iterator[StoredBatch | UnreadTail | ByteLimitReached]:
    """Every batch of a segment file, in order, then what stopped the reading if not the end.

    A batch whose frame is sane (magic 2, a length that fits in the file) is read whatever
    its CRC says, so one corrupt batch does not hide the ones after it.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        raise DumpError(f"{path}: {error.strerror or error}") from None
    try:
        yield from batches_in(fd, os.fstat(fd).st_size, max_bytes)
    except OSError as error:  # a directory named *.log, an I/O error
        raise DumpError(f"{path}: {error.strerror or error}") from None
    finally:
        os.close(fd)


def batches_in(
    fd: int, size: int, max_bytes: int | None
) -> Iterator[StoredBatch | UnreadTail | ByteLimitReached]:
    """The reading loop of ``read_batches`` over an open file of ``size`` bytes."""
    position = 0
    while position < size:
        remaining = size - position
        if max_bytes is not None and position >= max_bytes:
            yield ByteLimitReached(position, remaining, max_bytes)
            return
        if remaining < HEADER_SIZE:
            yield UnreadTail(position, remaining, "too short for a batch header")
            return
        header = parse_header(os.pread(fd, HEADER_SIZE, position), 0)
        header.position = position
        problem = frame_problem(header, remaining)
        if problem is not None:
            yield UnreadTail(position, remaining, problem)
            return
        if max_bytes is not None and position + header.size > max_bytes:
            yield ByteLimitReached(position, remaining, max_bytes)
            return
        data = os.pread(fd, header.size, position)
        yield StoredBatch(header, data, check_crc(data, dataclasses.replace(header, position=0)))
        position += header.size


def frame_problem(header: BatchHeader, remaining: int) -> str | None:
    """Why the bytes at a position cannot be a batch, or None if they can."""
    if header.magic != 2:
        return f"magic byte {header.magic} where a v2 batch has 2"
    if header.length < HEADER_SIZE - LOG_OVERHEAD:
        return f"batch length {header.length} is shorter than a batch header"
    if header.size > remaining:
        return f"a batch of {header.size} bytes with only {remaining} bytes left in the file"
    return None


# -- .log segments: records -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordView:
    offset: int
    timestamp: int  # milliseconds
    sequence: int
    key: bytes | None
    value: bytes | None
    header_keys: tuple[str, ...]


def read_records(batch: StoredBatch) -> Iterator[RecordView]:
    """The records of an uncompressed batch, decoded by kio.

    kio's Record keeps its timestamp to the second only, so the millisecond timestamp delta
    is read from the record's own prefix (length, attributes, timestamp delta).
    """
    header = batch.header
    position = HEADER_SIZE
    for _ in range(header.records_count):
        record, size = read_record(batch.data, header.base_timestamp, header.base_offset, position)
        yield RecordView(
            offset=record.offset,
            timestamp=record_timestamp(batch, position),
            sequence=record_sequence(header, record.offset),
            key=record.key,
            value=record.value,
            header_keys=tuple(
                (item.key or b"").decode("utf-8", errors="backslashreplace")
                for item in record.headers
            ),
        )
        position += size


def record_timestamp(batch: StoredBatch, record_position: int) -> int:
    header = batch.header
    if header.attributes & ATTR_LOG_APPEND_TIME:
        return header.max_timestamp  # every record shows the time the broker appended it
    _, length_size = read_signed_varint(batch.data, record_position)
    _, attributes_size = read_int8(batch.data, record_position + length_size)
    delta, _ = read_signed_varlong(batch.data, record_position + length_size + attributes_size)
    return header.base_timestamp + delta


def record_sequence(header: BatchHeader, offset: int) -> int:
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (header.base_sequence + offset - header.base_offset) % MAX_SEQUENCE


# -- .log segments: the lines -----------------------------------------------------------


def dump_log_segment(path: Path, options: DumpOptions) -> Iterator[DumpLine]:
    base_offset = base_offset_of(path)
    if base_offset is not None:
        yield DumpLine(f"Log starting offset: {base_offset}")
    gaps = offset_gaps_allowed(path)
    expected = base_offset
    for item in read_batches(path, options.max_bytes):
        if isinstance(item, StoredBatch):
            yield DumpLine(describe_batch(item, options.print_data_log), problem=not item.valid)
            header = item.header
            # Without a file name to go by, the first batch sets the expected offsets.
            start = header.base_offset if expected is None else expected
            problem = stored_header_problem(header, start, gaps)
            if problem is not None:
                yield DumpLine(
                    f"Error: the batch at position {header.position} is damaged: {problem} "
                    f"(these header fields are not covered by the CRC)",
                    problem=True,
                )
            expected = max(header.next_offset, start)
            if options.print_data_log and not is_compressed(item.header):
                yield from record_lines(item, options.decoder)
        elif isinstance(item, UnreadTail):
            yield DumpLine(describe_unread_tail(item, path), problem=True)
        else:
            yield DumpLine(describe_byte_limit(item))


def offset_gaps_allowed(path: Path) -> bool:
    """Whether the segment's partition may have offset gaps (compaction). Unknown (a
    segment away from its data directory): gaps are allowed, offsets must increase."""
    directory = path.parent
    if (directory / COMPACTED_MARKER).exists():
        return True
    registry = directory.parent / "topics.json"
    topic, _, number = directory.name.rpartition("-")
    try:
        entry = json.loads(registry.read_text())["topics"][topic]
    except (OSError, ValueError, KeyError):
        return True
    if not number.isdigit():
        return True
    policy = str(entry.get("configs", {}).get("cleanup.policy", "delete"))
    return "compact" in policy.split(",")


def describe_batch(batch: StoredBatch, print_data_log: bool = False) -> str:
    header = batch.header
    codec = compression_codec(header)
    if print_data_log and is_compressed(header):
        codec += " (records not shown)"
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.leader_epoch} "
        f"isTransactional: {boolean(header.is_transactional)} "
        f"isControl: {boolean(header.is_control)} position: {header.position} "
        f"{timestamp_type(header)}: {header.max_timestamp} size: {header.size} "
        f"magic: {header.magic} compresscodec: {codec} crc: {header.crc} "
        f"isvalid: {boolean(batch.valid)}"
    )


def record_lines(batch: StoredBatch, decoder: RecordDecoder) -> Iterator[DumpLine]:
    records = read_records(batch)
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except Exception as error:  # kio raises ValueError, BufferUnderflow, ...
            yield DumpLine(
                f"{RECORD_INDENT} records after this point could not be decoded: {error}",
                problem=True,
            )
            return
        yield DumpLine(describe_record(batch.header, record, decoder))


def describe_record(header: BatchHeader, record: RecordView, decoder: RecordDecoder) -> str:
    parts = [
        f"{RECORD_INDENT} offset: {record.offset} {timestamp_type(header)}: {record.timestamp}",
        f"keySize: {size_of(record.key)} valueSize: {size_of(record.value)}",
        f"sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]",
    ]
    if header.is_control:
        parts.append(describe_control_record(record))
    else:
        key, payload = decoder(record.offset, record.key, record.value)
        if key is not None:
            parts.append(f"key: {key}")
        if payload is not None:
            parts.append(f"payload: {payload}")
    return " ".join(parts)


def describe_control_record(record: RecordView) -> str:
    """A transaction marker as Kafka shows it: ``endTxnMarker: COMMIT coordinatorEpoch: 0``."""
    if record.key is None or len(record.key) < CONTROL_KEY.size:
        return "controlType: UNKNOWN(-1)"
    _, control_type = CONTROL_KEY.unpack_from(record.key)
    if control_type not in CONTROL_TYPES:
        return f"controlType: UNKNOWN({control_type})"
    epoch = "unknown"
    if record.value is not None and len(record.value) >= CONTROL_VALUE.size:
        epoch = str(CONTROL_VALUE.unpack_from(record.value)[1])
    return f"endTxnMarker: {CONTROL_TYPES[control_type]} coordinatorEpoch: {epoch}"


def describe_unread_tail(tail: UnreadTail, path: Path) -> str:
    return (
        f"Found {tail.unread_bytes} invalid bytes at the end of {path.name}: "
        f"at position {tail.position}, {tail.reason}; the dump stops here"
    )


def describe_byte_limit(limit: ByteLimitReached) -> str:
    return (
        f"Stopped at position {limit.position} (max bytes {limit.max_bytes}): "
        f"{limit.unread_bytes} bytes not read"
    )


def compression_codec(header: BatchHeader) -> str:
    code = header.attributes & ATTR_COMPRESSION_MASK
    return COMPRESSION_CODECS.get(code, f"unknown({code})")


def is_compressed(header: BatchHeader) -> bool:
    return bool(header.attributes & ATTR_COMPRESSION_MASK)


def timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.attributes & ATTR_LOG_APPEND_TIME else "CreateTime"


def boolean(value: bool) -> str:
    return "true" if value else "false"


def size_of(data: bytes | None) -> int:
    return -1 if data is None else len(data)
