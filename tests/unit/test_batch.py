"""Record batch headers: parsing, producer-batch validation, offset patching."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kio.records.readers import read_batch

from onceflow.log.batch import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CRC_START,
    HEADER_SIZE,
    KeyValue,
    assign_offset,
    build_batch,
    build_control_batch,
    check_crc,
    control_type_of,
    iter_headers,
    parse_header,
    read_key_values,
    set_log_append_time,
    validate_produce_records,
)
from onceflow.protocol.errors import ErrorCode, KafkaError

LIMIT = 1_000_000


def batch(values=(b"a", b"b", b"c"), timestamp=1_700_000_000_000, **kwargs) -> bytes:
    return build_batch(0, [KeyValue(None, v) for v in values], timestamp, **kwargs)


def with_sequence(data: bytes, producer_id: int, epoch: int, sequence: int) -> bytes:
    patched = bytearray(data)
    struct.pack_into(">qhi", patched, 43, producer_id, epoch, sequence)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[CRC_START:])))
    return bytes(patched)


def refused(data: bytes, limit: int = LIMIT) -> ErrorCode:
    with pytest.raises(KafkaError) as failure:
        validate_produce_records(data, limit)
    return failure.value.code


def test_header_fields():
    data = with_sequence(batch(), producer_id=7, epoch=2, sequence=10)
    header = parse_header(data)
    assert header.magic == 2
    assert header.size == len(data)
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 10)
    assert header.last_sequence == 12
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000
    assert header.has_producer_id and not header.is_transactional and not header.is_control
    assert check_crc(data, header)


def test_last_sequence_wraps_at_int32():
    data = with_sequence(batch(), producer_id=1, epoch=0, sequence=2**31 - 2)
    assert parse_header(data).last_sequence == 0
    assert parse_header(batch()).last_sequence == -1  # no sequence


def test_valid_producer_batch_passes():
    data = batch()
    header = validate_produce_records(data, LIMIT)
    assert header.base_offset == 0 and header.records_count == 3


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda d: d[: HEADER_SIZE - 1], ErrorCode.corrupt_message),
        (lambda d: d[:-1], ErrorCode.corrupt_message),  # shorter than its length field
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), ErrorCode.corrupt_message),  # CRC
        (lambda d: d[:16] + b"\x01" + d[17:], ErrorCode.unsupported_for_message_format),
        (lambda d: d + d, ErrorCode.invalid_record),
        (lambda d: d[:8] + struct.pack(">i", 10) + d[12:], ErrorCode.corrupt_message),
    ],
    ids=["short", "truncated", "crc", "magic1", "two-batches", "tiny-length"],
)
def test_invalid_producer_batches(damage, expected):
    assert refused(damage(batch())) == expected


def test_record_count_must_match_last_offset_delta():
    data = bytearray(batch())
    struct.pack_into(">i", data, 57, 5)  # records count
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[CRC_START:])))
    assert refused(bytes(data)) == ErrorCode.invalid_record


def test_too_large_and_control_and_transactional_without_producer():
    assert refused(batch(), limit=50) == ErrorCode.message_too_large
    control = build_control_batch(0, 5, 0, CONTROL_COMMIT, 0, 1)
    assert refused(control) == ErrorCode.invalid_record
    assert refused(batch(attributes=0x10)) == ErrorCode.invalid_record


def test_assign_offset_patches_only_uncovered_fields():
    data = batch()
    patched = assign_offset(data, 12345, leader_epoch=3)
    header = parse_header(patched)
    assert header.base_offset == 12345 and header.leader_epoch == 3
    assert header.last_offset == 12347 and header.next_offset == 12348
    assert patched[CRC_START:] == data[CRC_START:]
    assert check_crc(patched, header)
    decoded, _ = read_batch(bytes(patched), 0)  # a real reader accepts it
    assert [r.offset for r in decoded.records] == [12345, 12346, 12347]
    assert data[:8] == bytes(8)  # the input is not modified


def test_log_append_time_rewrites_crc():
    patched = assign_offset(batch(), 0)
    set_log_append_time(patched, 1_800_000_000_000)
    header = parse_header(patched)
    assert header.attributes & ATTR_LOG_APPEND_TIME
    assert header.max_timestamp == 1_800_000_000_000
    assert check_crc(patched, header)


def test_iter_headers_stops_at_torn_tail():
    first = assign_offset(batch(), 0)
    second = assign_offset(batch([b"x"]), 3)
    stream = bytes(first) + bytes(second)
    assert [h.base_offset for h in iter_headers(stream)] == [0, 3]
    assert [h.position for h in iter_headers(stream)] == [0, len(first)]
    assert [h.base_offset for h in iter_headers(stream[:-1])] == [0]
    assert [h.base_offset for h in iter_headers(stream + b"\x00" * 30)] == [0, 3]
    assert list(iter_headers(b"")) == []


def test_control_batches_round_trip():
    for control_type in (CONTROL_ABORT, CONTROL_COMMIT):
        data = build_control_batch(42, 9, 1, control_type, 7, 1_700_000_000_000)
        header = parse_header(data)
        assert header.is_control and header.is_transactional
        assert header.attributes & ATTR_CONTROL
        assert (header.base_offset, header.producer_id, header.producer_epoch) == (42, 9, 1)
        assert control_type_of(data, header) == control_type
        assert check_crc(data, header)


def test_read_key_values():
    data = build_batch(0, [KeyValue(b"k", b"v"), KeyValue(None, None)], 1)
    assert read_key_values(data, parse_header(data)) == [
        KeyValue(b"k", b"v"),
        KeyValue(None, None),
    ]
