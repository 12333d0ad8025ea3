"""Storage faults on real files without a broker: failed writes and fsyncs leave no trace,
recovery cuts only after the recovery point (with a quarantine copy), damage before it
takes the partition offline, and a damaged batch is never served."""

from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest

from onceflow.config import BrokerConfig, TopicConfig
from onceflow.log.batch import parse_header
from onceflow.log.durability import FAIL_ENV
from onceflow.log.manager import (
    RECOVERY_POINT_FILE,
    REGISTRY_FILE,
    LogManager,
    read_recovery_points,
)
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError
from tests.unit.test_segment_recovery import append, producer_batch, values


def open_log(directory, recovery_point=None, policy="os") -> PartitionLog:
    config = TopicConfig(BrokerConfig.from_strings({"log.flush.policy": policy}), {})
    log = PartitionLog(
        directory,
        "t",
        0,
        config,
        recovery_point=recovery_point,
        quarantine_root=directory.parent / "quarantine",
    )
    log.load()
    return log


def written_log(tmp_path, count=6) -> tuple[PartitionLog, os.PathLike]:
    log = open_log(tmp_path / "t-0")
    for number in range(count):
        append(log, f"v{number}".encode())
    log.close()
    return log, tmp_path / "t-0" / f"{0:020d}.log"


def flip_byte_in_batch(path, batch_number: int) -> None:
    data = bytearray(path.read_bytes())
    position = 0
    for _ in range(batch_number):
        position += parse_header(data, position).size
    data[position + parse_header(data, position).size - 1] ^= 0xFF  # inside its records
    path.write_bytes(bytes(data))


def quarantined(tmp_path) -> list:
    return sorted((tmp_path / "quarantine").rglob("*.log"))


def test_a_torn_tail_after_the_recovery_point_is_cut_loudly_with_a_copy(tmp_path, caplog):
    _, path = written_log(tmp_path)
    whole = path.read_bytes()
    os.truncate(path, len(whole) - 10)  # the last batch loses its end
    with caplog.at_level(logging.WARNING):
        recovered = open_log(tmp_path / "t-0", recovery_point=3)
    assert recovered.offline is None
    assert values(recovered) == [f"v{n}".encode() for n in range(5)]
    (copy,) = quarantined(tmp_path)
    assert whole.startswith(path.read_bytes() + copy.read_bytes())
    message = " ".join(record.getMessage() for record in caplog.records)
    assert "t-0" in message and path.name in message and "cut the tail after offset 4" in message
    assert "bytes" in message and str(copy) in message


def test_a_flipped_byte_after_the_recovery_point_is_cut_with_what_follows(tmp_path, caplog):
    _, path = written_log(tmp_path)
    flip_byte_in_batch(path, 4)
    with caplog.at_level(logging.WARNING):
        recovered = open_log(tmp_path / "t-0", recovery_point=4)
    assert values(recovered) == [f"v{n}".encode() for n in range(4)]
    (copy,) = quarantined(tmp_path)
    assert len(copy.read_bytes()) > 0
    assert "CRC mismatch in the batch at offset 4" in caplog.text
    assert "offsets 4-5 as far as readable (2 records in 2 batches)" in caplog.text


def test_a_flipped_byte_before_the_recovery_point_takes_the_partition_offline(tmp_path, caplog):
    _, path = written_log(tmp_path)
    flip_byte_in_batch(path, 1)
    before = path.read_bytes()
    with caplog.at_level(logging.ERROR):
        damaged = open_log(tmp_path / "t-0", recovery_point=6)
    # The recovery point is trusted: batches below it are not CRC-checked at start-up,
    # so the damage is found when the batch is about to be served.
    with pytest.raises(KafkaError) as error:
        damaged.read(0, 1 << 20, False)
    assert error.value.code == ErrorCode.corrupt_message  # a read of damaged data
    assert damaged.offline and "CRC mismatch in the batch at offset 1" in damaged.offline
    assert "offline" in caplog.text
    with pytest.raises(KafkaError) as error:
        append(damaged, b"more")
    assert error.value.code == ErrorCode.kafka_storage_error
    assert path.read_bytes() == before and not quarantined(tmp_path)


def test_structural_damage_before_the_recovery_point_is_not_cut(tmp_path):
    _, path = written_log(tmp_path)
    data = bytearray(path.read_bytes())
    second = parse_header(data).size
    data[second + 16] = 7  # the second batch's magic byte
    path.write_bytes(bytes(data))
    damaged = open_log(tmp_path / "t-0", recovery_point=6)
    assert damaged.offline and "below the recovery point 6" in damaged.offline
    assert path.read_bytes() == bytes(data) and not quarantined(tmp_path)


def test_a_log_shorter_than_its_recovery_point_is_offline_not_cut_further(tmp_path):
    _, path = written_log(tmp_path)
    os.truncate(path, path.stat().st_size - 10)
    size = path.stat().st_size
    damaged = open_log(tmp_path / "t-0", recovery_point=6)
    assert damaged.offline and "acknowledged data is damaged" in damaged.offline
    assert path.stat().st_size == size and not quarantined(tmp_path)


def test_a_clean_log_cut_at_a_batch_boundary_below_the_recovery_point_is_offline(tmp_path):
    _, path = written_log(tmp_path)
    data = path.read_bytes()
    position = 0
    for _ in range(4):
        position += parse_header(data, position).size
    os.truncate(path, position)  # batches 4 and 5 gone, no torn bytes left
    damaged = open_log(tmp_path / "t-0", recovery_point=6)
    assert damaged.offline and "acknowledged data is missing" in damaged.offline


def test_a_failed_write_leaves_no_trace_and_writes_resume(tmp_path, monkeypatch, caplog):
    log = open_log(tmp_path / "t-0")
    append(log, b"v0")
    real_writev = os.writev

    def half_then_full(fd, parts):
        data = b"".join(bytes(part) for part in parts)
        written = os.write(fd, data[: len(data) // 2])
        assert written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "writev", half_then_full)
    size = log.active.size
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaError) as error:
        append(log, b"lost")
    assert error.value.code == ErrorCode.kafka_storage_error
    assert "No space left on device" in caplog.text
    assert log.active.size == size == os.path.getsize(log.active.log_path)
    assert log.log_end_offset == 1
    monkeypatch.setattr(os, "writev", real_writev)
    assert append(log, b"v1") == 1
    assert values(log) == [b"v0", b"v1"]
    assert values(open_log(tmp_path / "t-0", recovery_point=2)) == [b"v0", b"v1"]


def test_an_idempotent_batch_refused_by_a_full_disk_is_accepted_when_retried(tmp_path, monkeypatch):
    log = open_log(tmp_path / "t-0")
    append(log, b"s0", producer_id=7, epoch=0, sequence=0)
    monkeypatch.setattr(
        os, "writev", lambda fd, parts: (_ for _ in ()).throw(OSError(errno.EFBIG, "too big"))
    )
    with pytest.raises(KafkaError):
        append(log, b"s1", producer_id=7, epoch=0, sequence=1)
    monkeypatch.undo()
    retried = producer_batch(b"s1", producer_id=7, epoch=0, sequence=1)
    result = log.append_client_batch(retried, parse_header(retried))
    assert not result.duplicate and result.base_offset == 1


def test_a_failed_fsync_drops_the_unsynced_tail_and_fails_its_waiters(tmp_path, monkeypatch):
    trigger = tmp_path / "fail-fsync"
    monkeypatch.setenv(FAIL_ENV, str(trigger))

    async def run() -> None:
        manager = LogManager(tmp_path / "data", BrokerConfig.from_strings({}))
        manager.load()
        partition = manager.create_topic("t", 1).partitions[0]
        manager.start()
        try:
            for sequence in range(3):
                data = producer_batch(b"ok", producer_id=5, epoch=0, sequence=sequence)
                result = partition.append_client_batch(data, parse_header(data))
            await asyncio.wait_for(partition.wait_durable(result.last_offset + 1), 5)
            trigger.touch()
            waits = []
            for sequence in (3, 4):
                data = producer_batch(b"lost", producer_id=5, epoch=0, sequence=sequence)
                result = partition.append_client_batch(data, parse_header(data))
                waits.append(partition.wait_durable(result.last_offset + 1))
            outcomes = await asyncio.gather(*waits, return_exceptions=True)
            assert all(
                isinstance(o, KafkaError) and o.code == ErrorCode.kafka_storage_error
                for o in outcomes
            )
            assert partition.log_end_offset == 3 and partition.high_watermark == 3
            trigger.unlink()
            # The producer retries sequence 3: it is new again, not a duplicate.
            data = producer_batch(b"again", producer_id=5, epoch=0, sequence=3)
            result = partition.append_client_batch(data, parse_header(data))
            assert not result.duplicate and result.base_offset == 3
            await asyncio.wait_for(partition.wait_durable(result.last_offset + 1), 5)
            assert values(partition) == [b"ok", b"ok", b"ok", b"again"]
        finally:
            await manager.stop()
            manager.close()

    asyncio.run(run())


def test_the_recovery_point_checkpoint_follows_fsyncs_and_topic_lifecycle(tmp_path):
    async def run() -> None:
        manager = LogManager(tmp_path, BrokerConfig.from_strings({}))
        manager.load()
        partition = manager.create_topic("t", 1).partitions[0]
        manager.start()
        data = producer_batch(b"x")
        result = partition.append_client_batch(data, parse_header(data))
        await partition.wait_durable(result.last_offset + 1)
        manager.write_recovery_points()
        assert read_recovery_points(tmp_path / RECOVERY_POINT_FILE)[("t", 0)] == 1
        manager.delete_topic("t")
        assert ("t", 0) not in read_recovery_points(tmp_path / RECOVERY_POINT_FILE)
        await manager.stop()
        manager.close()

    asyncio.run(run())
    lines = (tmp_path / RECOVERY_POINT_FILE).read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2  # Kafka's format


def test_topic_changes_the_disk_refuses_are_undone(tmp_path, monkeypatch):
    """topics.json is written after each change of topics; when that write fails the
    change is undone in memory and on disk, and the request fails with KAFKA_STORAGE_ERROR
    (an added partition that reached memory alone would take writes a restart forgets)."""
    import onceflow.log.manager as manager_module

    manager = LogManager(tmp_path / "data", BrokerConfig.from_strings({}))
    manager.load()
    manager.create_topic("kept", 1, configs={"retention.ms": "1000"})
    real_write = manager_module.write_atomically

    def refuse_registry(path, data):
        if path.name == REGISTRY_FILE:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(manager_module, "write_atomically", refuse_registry)
    changes = (
        lambda: manager.create_topic("new", 2),
        lambda: manager.add_partitions("kept", 3),
        lambda: manager.set_topic_configs("kept", {"retention.ms": 5}),
        lambda: manager.delete_topic("kept"),
    )
    for change in changes:
        with pytest.raises(KafkaError) as error:
            change()
        assert error.value.code == ErrorCode.kafka_storage_error
        assert "No space left on device" in error.value.message

    def as_before(logs: LogManager) -> None:
        assert sorted(logs.topics) == ["kept"]
        assert len(logs.topics["kept"].partitions) == 1
        assert logs.topics["kept"].config.overrides == {"retention.ms": 1000}
        assert sorted(p.name for p in (tmp_path / "data").glob("*-*") if p.is_dir()) == ["kept-0"]

    as_before(manager)
    manager.close()
    monkeypatch.undo()
    reopened = LogManager(tmp_path / "data", BrokerConfig.from_strings({}))
    reopened.load()
    as_before(reopened)
    reopened.add_partitions("kept", 2)  # the same changes go through once the disk takes them
    assert len(reopened.topics["kept"].partitions) == 2
    reopened.close()


def test_delete_records_the_disk_refuses_leaves_the_records_readable(tmp_path, monkeypatch):
    import onceflow.log.segment_list as segment_list_module

    log = open_log(tmp_path / "t-0")
    for number in range(3):
        append(log, f"v{number}".encode())
    monkeypatch.setattr(
        segment_list_module,
        "write_atomically",
        lambda path, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")),
    )
    with pytest.raises(KafkaError) as error:
        log.retention.delete_records_before(2)
    assert error.value.code == ErrorCode.kafka_storage_error
    assert log.log_start_offset == 0 and values(log) == [b"v0", b"v1", b"v2"]
    monkeypatch.undo()
    assert log.retention.delete_records_before(2) == 2
    log.close()
    assert open_log(tmp_path / "t-0", recovery_point=3).log_start_offset == 2
