"""acks=all durability: one fsync serves every append waiting in that loop turn, and
under log.flush.policy=always the high watermark is the durable offset."""

from __future__ import annotations

import asyncio
import os
import random
import threading

from onceflow.config import BrokerConfig
from onceflow.log.batch import KeyValue, build_batch, parse_header
from onceflow.log.durability import JOURNAL_ENV
from onceflow.log.manager import LogManager
from onceflow.log.power_loss import simulate_power_loss
from tests.unit.test_segment_recovery import producer_batch


def batch(value: bytes) -> bytes:
    return build_batch(0, [KeyValue(None, value)], 1_700_000_000_000)


def count_fsyncs(monkeypatch) -> list[int]:
    """The file descriptors of every data fsync (fdatasync) from now on."""
    fsyncs: list[int] = []
    original = os.fdatasync

    def counting_fdatasync(fd: int) -> None:
        fsyncs.append(fd)
        original(fd)

    monkeypatch.setattr(os, "fdatasync", counting_fdatasync)
    return fsyncs


def test_concurrent_appends_share_fsyncs_and_hw_waits_for_them(tmp_path, monkeypatch):
    fsyncs = count_fsyncs(monkeypatch)

    async def run() -> None:
        manager = LogManager(tmp_path, BrokerConfig.from_strings({}))
        manager.load()
        topic = manager.create_topic("t", 2)
        manager.start()
        try:
            fsyncs.clear()
            waits = []
            for number in range(50):  # 50 "producers" appending in one loop turn
                partition = topic.partitions[number % 2]
                data = batch(str(number).encode())
                result = partition.append_client_batch(data, parse_header(data))
                # Not durable yet: not visible to consumers either.
                assert partition.high_watermark <= result.base_offset
                assert partition.read(0, 1 << 20, False).records == b""
                waits.append(partition.wait_durable(result.last_offset + 1))
            await asyncio.wait_for(asyncio.gather(*waits), 10)
            assert 1 <= len(fsyncs) <= 4, f"{len(fsyncs)} fsyncs for 50 appends"
            for partition in topic.partitions:
                assert partition.high_watermark == partition.log_end_offset == 25
                assert partition.read(0, 1 << 20, False).records
        finally:
            await manager.stop()
            manager.close()

    asyncio.run(run())


def test_os_policy_acknowledges_without_fsync(tmp_path, monkeypatch):
    fsyncs = count_fsyncs(monkeypatch)

    async def run() -> None:
        manager = LogManager(tmp_path, BrokerConfig.from_strings({"log.flush.policy": "os"}))
        manager.load()
        partition = manager.create_topic("t", 1).partitions[0]
        manager.start()
        try:
            fsyncs.clear()
            data = batch(b"x")
            result = partition.append_client_batch(data, parse_header(data))
            assert partition.high_watermark == 1  # visible at once
            await asyncio.wait_for(partition.wait_durable(result.last_offset + 1), 1)
            assert fsyncs == []
        finally:
            await manager.stop()
            manager.close()

    asyncio.run(run())


def test_rolls_fsync_nothing_on_the_event_loop(tmp_path, monkeypatch):
    """A roll leaves the closed segment, the new segment's name and the producer-state
    snapshot to the partition's next fsync, which runs in an fsync thread."""
    loop_thread = threading.get_ident()
    on_the_loop: list[str] = []
    for name in ("fdatasync", "fsync"):
        original = getattr(os, name)

        def watched(fd: int, original=original, name=name) -> None:
            if threading.get_ident() == loop_thread:
                on_the_loop.append(name)
            original(fd)

        monkeypatch.setattr(os, name, watched)

    async def run() -> None:
        manager = LogManager(tmp_path, BrokerConfig.from_strings({}))
        manager.load()
        topic = manager.create_topic("t", 1, configs={"segment.bytes": "300"})
        partition = topic.partitions[0]
        manager.start()
        on_the_loop.clear()
        try:
            for sequence in range(12):
                data = producer_batch(b"x" * 50, producer_id=3, epoch=0, sequence=sequence)
                result = partition.append_client_batch(data, parse_header(data))
                await asyncio.wait_for(partition.wait_durable(result.last_offset + 1), 10)
            assert on_the_loop == []
            bases = [segment.base_offset for segment in partition.segments]
            assert len(bases) >= 4
            # Each roll's snapshot was written once the offsets before it were durable.
            assert partition.producers.snapshot_offsets() == bases[-2:]
            assert partition.durability.synced.offset == partition.log_end_offset == 12
        finally:
            await manager.stop()
            manager.close()

    asyncio.run(run())
    reopened = LogManager(tmp_path, BrokerConfig.from_strings({}))
    reopened.load()
    partition = reopened.partition("t", 0)
    assert partition.log_end_offset == 12
    entry = partition.producers.entry(3)
    assert entry is not None and entry.last_seq == 11


def test_a_power_loss_after_a_roll_keeps_every_acknowledged_batch(tmp_path, monkeypatch):
    """Two batches in one loop turn, the second rolling the segment: once both are
    acknowledged, a power loss (every file cut back to what was fsynced) keeps both, and
    the producer state the roll's snapshot carries."""
    journal = tmp_path / "fsync-journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    data_dir = tmp_path / "data"

    async def run() -> None:
        manager = LogManager(data_dir, BrokerConfig.from_strings({}))
        manager.load()
        partition = manager.create_topic("t", 1, configs={"segment.bytes": "300"}).partitions[0]
        manager.start()
        for round_number in range(3):
            waits = []
            for sequence in (2 * round_number, 2 * round_number + 1):
                data = producer_batch(b"x" * 120, producer_id=3, epoch=0, sequence=sequence)
                result = partition.append_client_batch(data, parse_header(data))
                waits.append(partition.wait_durable(result.last_offset + 1))
            await asyncio.wait_for(asyncio.gather(*waits), 10)
        assert len(partition.segments) >= 3
        await manager.stop()  # the fsync threads; no close(): nothing more is fsynced

    asyncio.run(run())
    simulate_power_loss(data_dir, journal, random.Random(7), torn_tails=False)
    reopened = LogManager(data_dir, BrokerConfig.from_strings({}))
    reopened.load()
    partition = reopened.partition("t", 0)
    assert partition.log_end_offset == 6
    assert [header.base_offset for header, _ in partition.iter_batches()] == list(range(6))
    entry = partition.producers.entry(3)
    assert entry is not None and entry.last_seq == 5


def test_start_up_makes_what_a_sigkill_left_in_the_page_cache_durable(tmp_path, monkeypatch):
    """Segments rolled and written but never fsynced (a SIGKILL keeps them in the page
    cache) are fsynced when the log is loaded again, before it counts them as durable: a
    power loss after the restart loses nothing."""
    journal = tmp_path / "fsync-journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    data_dir = tmp_path / "data"
    killed = LogManager(data_dir, BrokerConfig.from_strings({}))
    killed.load()
    partition = killed.create_topic("t", 1, configs={"segment.bytes": "300"}).partitions[0]
    for sequence in range(6):  # no fsync thread runs: nothing of this is fsynced
        data = producer_batch(b"x" * 120, producer_id=3, epoch=0, sequence=sequence)
        partition.append_client_batch(data, parse_header(data))
    assert len(partition.segments) >= 3

    restarted = LogManager(data_dir, BrokerConfig.from_strings({}))
    restarted.load()
    assert restarted.partition("t", 0).durability.synced.offset == 6
    simulate_power_loss(data_dir, journal, random.Random(7), torn_tails=False)
    after_power_loss = LogManager(data_dir, BrokerConfig.from_strings({}))
    after_power_loss.load()
    assert after_power_loss.partition("t", 0).log_end_offset == 6
