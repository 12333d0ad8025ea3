"""Segment scanning and crash recovery of a partition log, without a broker."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest

from onceflow.config import BrokerConfig, TopicConfig
from onceflow.log.batch import KeyValue, assign_offset, build_batch, parse_header, read_key_values
from onceflow.log.partition_log import PartitionLog
from onceflow.log.segment import OFFSET_ENTRY, TIME_ENTRY, LogSegment
from onceflow.protocol.errors import ErrorCode, KafkaError

BASE_TS = 1_700_000_000_000


def producer_batch(value, producer_id=-1, epoch=-1, sequence=-1, timestamp=BASE_TS) -> bytes:
    data = bytearray(build_batch(0, [KeyValue(None, value)], timestamp, producer_id=producer_id))
    if producer_id >= 0:
        struct.pack_into(">hi", data, 51, epoch, sequence)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def open_log(directory, **overrides) -> PartitionLog:
    config = TopicConfig(BrokerConfig.from_strings({"log.flush.policy": "os"}), overrides)
    log = PartitionLog(directory, "t", 0, config)
    log.load()
    return log


def append(log: PartitionLog, value: bytes, **kwargs) -> int:
    data = producer_batch(value, **kwargs)
    return log.append_client_batch(data, parse_header(data)).base_offset


def values(log: PartitionLog) -> list[bytes]:
    out = []
    for header, data in log.iter_batches():
        header.position = 0
        out += [kv.value for kv in read_key_values(data, header)]
    return out


def test_segment_indexes_and_lookup(tmp_path):
    segment = LogSegment(tmp_path, 100, index_interval_bytes=1)  # index every batch
    for number in range(10):
        built = build_batch(0, [KeyValue(None, b"x")], BASE_TS + number * 10)
        data = assign_offset(built, 100 + number)
        segment.append(data, parse_header(data))
    assert segment.next_offset == 110 and segment.max_timestamp == BASE_TS + 90
    assert (tmp_path / f"{100:020d}.index").stat().st_size == 0  # gathered in memory
    segment.flush_index_files()
    assert (tmp_path / f"{100:020d}.index").stat().st_size == 10 * OFFSET_ENTRY.size
    assert (tmp_path / f"{100:020d}.timeindex").stat().st_size == 10 * TIME_ENTRY.size
    assert [h.base_offset for h in segment.headers_from(105)] == list(range(105, 110))
    first = next(segment.headers_for_timestamp(BASE_TS + 35))
    assert first.base_offset <= 104
    matching = [
        h for h in segment.headers_for_timestamp(BASE_TS + 35) if h.max_timestamp >= BASE_TS + 35
    ]
    assert matching[0].base_offset == 104
    segment.close()


@pytest.mark.parametrize("cut", [1, 30, 61, -1])
def test_recovery_truncates_a_torn_tail(tmp_path, cut):
    log = open_log(tmp_path / "t-0")
    for number in range(5):
        assert append(log, f"v{number}".encode()) == number
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    size = path.stat().st_size
    whole = path.read_bytes()
    first_size = parse_header(whole).size
    with open(path, "ab") as handle:  # a 6th batch written only partly
        handle.write(whole[: cut % first_size])
    recovered = open_log(tmp_path / "t-0")
    assert recovered.log_end_offset == 5
    assert path.stat().st_size == size
    assert values(recovered) == [f"v{n}".encode() for n in range(5)]
    assert append(recovered, b"next") == 5


def test_recovery_drops_stale_intact_batches_whose_offsets_go_backwards(tmp_path):
    """Old bytes past the real end (e.g. a reused block) can hold a batch with a valid
    CRC; taking it would move the log end offset backwards and reuse offsets."""
    log = open_log(tmp_path / "t-0")
    for number in range(5):
        append(log, f"v{number}".encode())
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(whole[: parse_header(whole).size])  # batch 0 again, intact
    recovered = open_log(tmp_path / "t-0")
    assert recovered.log_end_offset == 5
    assert path.stat().st_size == len(whole)
    assert append(recovered, b"next") == 5


def test_recovery_drops_a_batch_with_a_bad_crc_and_what_follows(tmp_path):
    log = open_log(tmp_path / "t-0")
    for number in range(4):
        append(log, f"v{number}".encode())
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # inside the last batch's records
    path.write_bytes(bytes(data))
    recovered = open_log(tmp_path / "t-0")
    assert recovered.log_end_offset == 3
    assert values(recovered) == [b"v0", b"v1", b"v2"]


def test_recovery_rebuilds_producer_state_without_snapshots(tmp_path):
    log = open_log(tmp_path / "t-0")
    for sequence in range(3):
        append(log, b"p", producer_id=9, epoch=0, sequence=sequence)
    # SIGKILL: no close(), so no snapshot; the directory holds only the log and indexes.
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    recovered = open_log(tmp_path / "t-0")
    duplicate = producer_batch(b"p", producer_id=9, epoch=0, sequence=2)
    result = recovered.append_client_batch(duplicate, parse_header(duplicate))
    assert result.duplicate and result.base_offset == 2
    assert recovered.log_end_offset == 3


def test_snapshot_beyond_a_truncated_log_is_not_used(tmp_path):
    log = open_log(tmp_path / "t-0")
    for sequence in range(3):
        append(log, b"p", producer_id=9, epoch=0, sequence=sequence)
    log.close()  # writes a snapshot at offset 3
    assert (tmp_path / "t-0" / f"{3:020d}.snapshot").exists()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    os.truncate(path, path.stat().st_size - 5)  # tear the last batch (sequence 2)
    recovered = open_log(tmp_path / "t-0")
    assert recovered.log_end_offset == 2
    # Sequence 2 is not a duplicate any more: it was lost with the torn batch.
    again = producer_batch(b"p", producer_id=9, epoch=0, sequence=2)
    result = recovered.append_client_batch(again, parse_header(again))
    assert not result.duplicate and result.base_offset == 2


def test_log_start_offset_and_segments_after_reopen(tmp_path):
    log = open_log(tmp_path / "t-0", **{"segment.bytes": 200})
    for number in range(12):
        append(log, f"v{number:02d}".encode())
    assert len(log.segments) > 2
    assert log.retention.delete_records_before(7) == 7
    bases = [segment.base_offset for segment in log.segments]
    assert bases[0] <= 7 < (bases[1] if len(bases) > 1 else 99)
    log.close()
    reopened = open_log(tmp_path / "t-0", **{"segment.bytes": 200})
    assert reopened.log_start_offset == 7
    assert reopened.log_end_offset == 12
    assert [s.base_offset for s in reopened.segments] == bases


def test_indexes_are_rebuilt_when_garbled(tmp_path):
    log = open_log(tmp_path / "t-0", **{"index.interval.bytes": 1})
    for number in range(6):
        append(log, f"v{number}".encode(), timestamp=BASE_TS + number)
    log.close()
    for suffix in (".index", ".timeindex"):
        (tmp_path / "t-0" / f"{0:020d}{suffix}").write_bytes(b"\xff" * 13)
    reopened = open_log(tmp_path / "t-0", **{"index.interval.bytes": 1})
    assert reopened.reads.offset_for_timestamp(BASE_TS + 3) == (3, BASE_TS + 3)
    assert (tmp_path / "t-0" / f"{0:020d}.index").stat().st_size == 6 * OFFSET_ENTRY.size


def write_ten(directory, **overrides) -> list[int]:
    """Ten one-record batches, closed cleanly; the byte position of each batch."""
    log = open_log(directory, **overrides)
    for number in range(10):
        append(log, f"v{number}".encode())
    log.close()
    positions = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position < len(data):
            positions.append((segment, position))
            position += parse_header(data, position).size
    return positions


def reopen_below_recovery_point(directory, **overrides) -> PartitionLog:
    config = TopicConfig(BrokerConfig.from_strings({"log.flush.policy": "os"}), overrides)
    log = PartitionLog(directory, "t", 0, config, recovery_point=10)
    log.load()
    return log


def patch(path, position: int, fmt: str, value: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, position, value)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("field_at", "fmt", "value", "problem"),
    [
        (
            0,
            ">q",
            5 | 0xFF << 48,
            "batch with offset 71776119061217285 where offset 5 was expected",
        ),
        (0, ">q", 133, "batch with offset 133 where offset 5 was expected"),
        (0, ">q", 4, "batch with offset 4 where offset 5 was expected"),
        (12, ">i", 7, "partition leader epoch 7"),
        (16, ">b", 1, "batch with magic 1"),
        (23, ">i", 3, "batch with 1 records but last offset delta 3"),
        (57, ">i", 2, "batch with 2 records but last offset delta 0"),
    ],
)
def test_damage_outside_the_crc_below_the_recovery_point_takes_the_partition_offline(
    tmp_path, field_at, fmt, value, problem
):
    positions = write_ten(tmp_path / "t-0")
    segment, position = positions[5]
    patch(segment, position + field_at, fmt, value)
    damaged = segment.read_bytes()
    log = reopen_below_recovery_point(tmp_path / "t-0")
    assert log.offline and problem in log.offline
    assert segment.read_bytes() == damaged  # nothing was cut
    assert not (tmp_path / "quarantine").exists()


def test_a_segment_that_does_not_start_where_the_one_before_ends_is_damage(tmp_path):
    positions = write_ten(tmp_path / "t-0", **{"segment.bytes": 200})
    segments = sorted({segment for segment, _ in positions})
    assert len(segments) >= 3
    segments[1].unlink()  # a whole middle segment lost
    log = reopen_below_recovery_point(tmp_path / "t-0", **{"segment.bytes": 200})
    assert log.offline and "follows a segment ending before offset" in log.offline


def test_a_batch_running_into_the_next_segment_is_damage(tmp_path):
    positions = write_ten(tmp_path / "t-0", **{"segment.bytes": 200})
    first_segment = positions[0][0]
    last_in_first = [p for s, p in positions if s == first_segment][-1]
    patch(first_segment, last_in_first + 23, ">i", 5)  # lastOffsetDelta
    patch(first_segment, last_in_first + 57, ">i", 6)  # recordsCount, consistent with it
    log = reopen_below_recovery_point(tmp_path / "t-0", **{"segment.bytes": 200})
    assert log.offline and "outside its segment" in log.offline


def test_a_compacted_log_may_have_gaps_but_offsets_still_increase(tmp_path):
    positions = write_ten(tmp_path / "t-0", **{"cleanup.policy": "compact"})
    segment, position = positions[5]
    data = bytearray(segment.read_bytes())
    size = parse_header(data, position).size
    del data[position : position + size]  # the cleaner dropped the batch at offset 5
    segment.write_bytes(bytes(data))
    log = reopen_below_recovery_point(tmp_path / "t-0", **{"cleanup.policy": "compact"})
    assert not log.offline and log.log_end_offset == 10
    assert values(log) == [f"v{n}".encode() for n in range(10) if n != 5]
    log.close()
    patch(segment, position, ">q", 3)  # the batch after the gap now goes backwards
    log = reopen_below_recovery_point(tmp_path / "t-0", **{"cleanup.policy": "compact"})
    assert log.offline and "batch with offset 3 where offset 5 was expected" in log.offline


def test_damage_appearing_while_serving_takes_the_partition_offline(tmp_path):
    positions = write_ten(tmp_path / "t-0")
    log = reopen_below_recovery_point(tmp_path / "t-0")
    segment, position = positions[5]
    patch(segment, position, ">q", 133)  # the file changes under a running broker
    with pytest.raises(KafkaError) as raised:
        log.read(0, 1 << 20, False)
    assert raised.value.code == ErrorCode.corrupt_message
    assert log.offline and "batch with offset 133 where offset 5 was expected" in log.offline
