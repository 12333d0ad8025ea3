"""Batch-granular compaction keeps the newest record per key and every offset."""

from __future__ import annotations

from onceflow.config import BrokerConfig, TopicConfig
from onceflow.log.batch import KeyValue, read_key_values
from onceflow.log.cleaner import compact
from onceflow.log.partition_log import PartitionLog


def open_log(tmp_path) -> PartitionLog:
    config = TopicConfig(
        BrokerConfig.from_strings({"log.flush.policy": "os"}),
        {"cleanup.policy": "compact", "segment.bytes": 300},
    )
    partition = PartitionLog(tmp_path / "compacted-0", "compacted", 0, config)
    partition.load()
    return partition


def visible(partition: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for header, data in partition.iter_batches():
        base = header.base_offset
        header.position = 0
        out += [(base + i, r.key, r.value) for i, r in enumerate(read_key_values(data, header))]
    return out


def test_superseded_batches_are_dropped_and_offsets_kept(tmp_path):
    partition = open_log(tmp_path)
    for round_number in range(6):
        for key in (b"a", b"b"):
            partition.append_records([KeyValue(key, f"{key.decode()}{round_number}".encode())])
    partition.append_records([KeyValue(b"c", b"c0")])
    assert len(partition.segments) > 2
    assert compact(partition) == 0  # nothing is durable yet (no fsync under policy os)
    partition.sync_now()  # as the broker does after a roll
    before = visible(partition)
    removed = compact(partition)
    after = visible(partition)
    assert removed > 0
    assert len(after) < len(before)
    latest = {key: value for _, key, value in before}
    assert {key: value for _, key, value in after} == latest
    offsets = [offset for offset, _, _ in after]
    assert offsets == sorted(offsets)
    assert partition.log_end_offset == 13

    reopened = PartitionLog(partition.directory, "compacted", 0, partition.config)
    partition.close()
    reopened.load()
    assert visible(reopened) == after
    assert reopened.log_end_offset == 13
    assert reopened.append_records([KeyValue(b"a", b"new")]) == 13


def test_appends_after_a_roll_go_to_the_new_segment(tmp_path):
    partition = open_log(tmp_path)
    offsets = [partition.append_records([KeyValue(b"k", bytes(100))]) for _ in range(20)]
    assert offsets == list(range(20))
    assert len(partition.segments) > 3
    assert partition.log_end_offset == 20
    assert [h.base_offset for h, _ in partition.iter_batches()] == list(range(20))


def test_damage_found_by_the_cleaner_takes_the_partition_offline_and_changes_nothing(tmp_path):
    partition = open_log(tmp_path)
    for round_number in range(12):
        partition.append_records([KeyValue(b"a", f"a{round_number}".encode())])
    partition.sync_now()
    assert len(partition.segments) >= 2
    first = partition.segments[0].log_path
    data = bytearray(first.read_bytes())
    data[7] ^= 0x01  # the first batch's base offset: the headers no longer hold together
    first.write_bytes(bytes(data))
    files = {path: path.read_bytes() for path in partition.directory.glob("*.log")}

    assert compact(partition) == 0  # no exception: the cleaner's loop goes on
    assert partition.offline and "batch with offset 1 where offset 2 was expected" in (
        partition.offline
    )
    assert compact(partition) == 0  # an offline partition is left alone
    assert {path: path.read_bytes() for path in partition.directory.glob("*.log")} == files
