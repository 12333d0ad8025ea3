"""acks=all durability: one fsync serves every append waiting in that loop turn, and
under log.flush.policy=always the high watermark is the durable offset."""

from __future__ import annotations

import asyncio

from onceflow.config import BrokerConfig
from onceflow.log.batch import KeyValue, build_batch, parse_header
from onceflow.log.manager import LogManager
from onceflow.log.segment import LogSegment


def batch(value: bytes) -> bytes:
    return build_batch(0, [KeyValue(None, value)], 1_700_000_000_000)


def test_concurrent_appends_share_fsyncs_and_hw_waits_for_them(tmp_path, monkeypatch):
    fsyncs = []
    original = LogSegment.flush

    def counting_flush(segment):
        fsyncs.append(segment.base_offset)
        original(segment)

    monkeypatch.setattr(LogSegment, "flush", counting_flush)

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
    fsyncs = []
    monkeypatch.setattr(LogSegment, "flush", lambda segment: fsyncs.append(1))

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
