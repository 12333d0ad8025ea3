"""What ``onceflow log dump`` prints for each of the broker's on-disk files.

The equivalent of Apache Kafka's ``kafka-dump-log.sh``, with Kafka's wording so its output
reads (and greps) the same: a line per batch of a ``.log`` segment, with
``print_data_log`` a ``| ``-prefixed line per record, and the entries of ``.index``,
``.timeindex``, ``.txnindex``, producer-state ``.snapshot`` files and ``partition.json``.

Everything here only reads: files are opened read-only and none of the broker's loading
code (which truncates torn tails and rewrites indexes) is used. Each function yields
``DumpLine``s; a line with ``problem`` set reports damage (a batch whose CRC does not
match, bytes at the end that are not a whole batch or entry, an unreadable snapshot).
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from collections.abc import Callable, Iterator
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
from onceflow.log.record_decoders import RecordDecoder, decode_as_text
from onceflow.log.segment import COMPACTED_MARKER, OFFSET_ENTRY, TIME_ENTRY
from onceflow.log.txn_index import TXN_ENTRY

RECORD_INDENT = "|"
COMPRESSION_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT"}
CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
MAX_SEQUENCE = 2**31


class DumpError(Exception):
    """A file that cannot be dumped at all: missing, unreadable, or of an unknown kind."""


@dataclass(frozen=True, slots=True)
class DumpLine:
    text: str
    problem: bool = False  # the line reports damage in the file


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    decoder: RecordDecoder = decode_as_text
    max_bytes: int | None = None  # read no batch that ends past this position


# -- dispatch ---------------------------------------------------------------------------


def dump_file(path: Path, options: DumpOptions) -> Iterator[DumpLine]:
    """The lines describing one file, chosen by its name."""
    dumper = dumper_for(path)
    if dumper is None:
        raise DumpError(
            f"{path}: unknown kind of file (expected .log, .index, .timeindex, .txnindex, "
            ".snapshot or partition.json)"
        )
    yield from dumper(path, options)


def dumper_for(path: Path) -> Callable[[Path, DumpOptions], Iterator[DumpLine]] | None:
    if path.name == "partition.json":
        return dump_partition_checkpoint
    return {
        ".log": dump_log_segment,
        ".index": dump_offset_index,
        ".timeindex": dump_time_index,
        ".txnindex": dump_txn_index,
        ".snapshot": dump_producer_snapshot,
    }.get(path.suffix)


def base_offset_of(path: Path) -> int | None:
    """The offset a segment file is named after (``00000000000000000042.log`` -> 42)."""
    try:
        return int(path.stem)
    except ValueError:
        return None


def read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DumpError(f"{path}: {error.strerror or error}") from None


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


# -- indexes ----------------------------------------------------------------------------


def fixed_entries(data: bytes, entry: struct.Struct) -> Iterator[tuple]:
    usable = len(data) - len(data) % entry.size
    for position in range(0, usable, entry.size):
        yield entry.unpack_from(data, position)


def partial_entry_line(data: bytes, entry: struct.Struct, path: Path) -> Iterator[DumpLine]:
    leftover = len(data) % entry.size
    if leftover:
        yield DumpLine(
            f"Found {leftover} invalid bytes at the end of {path.name}: "
            f"a partial {entry.size}-byte entry at position {len(data) - leftover}",
            problem=True,
        )


def dump_index(
    path: Path, entry: struct.Struct, relative_at: int, describe: Callable[[int, tuple], str]
) -> Iterator[DumpLine]:
    """``describe(base_offset, entry)`` per entry of an offset or time index, whose relative
    offset is field ``relative_at``."""
    data = read_file(path)
    base_offset = base_offset_of(path) or 0
    if not data:
        yield DumpLine(f"{path} is empty.")
    for number, values in enumerate(fixed_entries(data, entry)):
        if number > 0 and values[relative_at] == 0:
            break  # zeroed space after the last entry (a preallocated index), as in Kafka
        yield DumpLine(describe(base_offset, values))
    yield from partial_entry_line(data, entry, path)


def dump_offset_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """``offset: N position: N`` per entry, offsets made absolute as Kafka prints them."""
    yield from dump_index(
        path, OFFSET_ENTRY, 0, lambda base, e: f"offset: {base + e[0]} position: {e[1]}"
    )


def dump_time_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """``timestamp: N offset: N`` per entry."""
    yield from dump_index(
        path, TIME_ENTRY, 1, lambda base, e: f"timestamp: {e[0]} offset: {base + e[1]}"
    )


def dump_txn_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """The aborted transactions recorded for a segment."""
    data = read_file(path)
    if not data:
        yield DumpLine(f"{path} is empty.")
    for version, producer_id, first, last, stable in fixed_entries(data, TXN_ENTRY):
        yield DumpLine(
            f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {stable}"
        )
    yield from partial_entry_line(data, TXN_ENTRY, path)


# -- producer state and the partition checkpoint ----------------------------------------


def dump_producer_snapshot(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """A producer-state snapshot, read directly (ProducerStateManager deletes bad ones).

    One line per producer in Kafka's wording with its newest batch, then a ``|`` line per
    batch onceflow remembers for duplicate detection.
    """
    try:
        state = json.loads(read_file(path))
        producers = state["producers"]
        yield DumpLine(f"Producer state snapshot at offset {state['offset']}")
        for producer in producers:
            yield from producer_lines(producer)
    except (ValueError, KeyError, TypeError) as error:
        yield DumpLine(f"{path.name} is not a readable producer snapshot: {error!r}", problem=True)


def producer_lines(producer: dict) -> Iterator[DumpLine]:
    batches = producer["batches"]
    text = (
        f"producerId: {producer['producer_id']} producerEpoch: {producer['epoch']} "
        f"coordinatorEpoch: {producer['coordinator_epoch']} "
        f"currentTxnFirstOffset: {producer['txn_first_offset']} "
        f"lastTimestamp: {producer['last_timestamp']}"
    )
    if batches:
        first_seq, last_seq, first_offset, last_offset, timestamp = batches[-1]
        text += (
            f" firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} "
            f"offsetDelta: {last_offset - first_offset} timestamp: {timestamp}"
        )
    yield DumpLine(text)
    for first_seq, last_seq, first_offset, last_offset, timestamp in batches:
        yield DumpLine(
            f"{RECORD_INDENT} firstSequence: {first_seq} lastSequence: {last_seq} "
            f"firstOffset: {first_offset} lastOffset: {last_offset} timestamp: {timestamp}"
        )


def dump_partition_checkpoint(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    try:
        checkpoint = json.loads(read_file(path))
        yield DumpLine(f"logStartOffset: {checkpoint['log_start_offset']}")
        for end, base in checkpoint.get("skipped_offsets", []):
            yield DumpLine(f"skippedOffsets: {end}-{base - 1} (cut by a repair, never reused)")
    except (ValueError, KeyError, TypeError) as error:
        yield DumpLine(f"{path.name} is not a readable checkpoint: {error!r}", problem=True)
