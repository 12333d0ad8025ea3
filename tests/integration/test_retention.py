"""Segment rolling, retention by size and time, DeleteRecords, the log start offset across
restarts, and ListOffsets by timestamp over many segments."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)

from onceflow.log.batch import iter_headers
from onceflow.protocol.client import WireClient
from onceflow.testing import BrokerProcess
from tests.kit.batches import record_batch
from tests.kit.wait import wait_until
from tests.kit.wire import create_topic, fetch, fetch_values, list_offset, produce

FAST_RETENTION = {"log.retention.check.interval.ms": "50"}
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", config=FAST_RETENTION).start()
    yield process
    process.stop()


def segments(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def earliest(client: WireClient, topic: str) -> int:
    code, offset, _ = list_offset(client, topic, 0, -2)
    assert code == 0
    return offset


def fill(client: WireClient, topic: str, count: int, start: int = 0, timestamp_ms=None):
    for number in range(start, start + count):
        stamp = None if timestamp_ms is None else timestamp_ms(number)
        batch = record_batch([f"r{number:04d}".encode() + bytes(50)], timestamp_ms=stamp)
        code, offset = produce(client, topic, 0, batch)
        assert (code, offset) == (0, number)


def test_small_segments_roll_and_read_across_boundaries(broker):
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "roll", configs={"segment.bytes": "1000"})
        fill(client, "roll", 60)
        files = segments(broker, "roll")
        assert len(files) >= 5
        next_base = 0
        for path in files:  # named by base offset, contiguous, each within segment.bytes
            assert int(path.stem) == next_base
            data = path.read_bytes()
            headers = list(iter_headers(data))
            assert headers and headers[0].base_offset == next_base
            assert sum(h.size for h in headers) == len(data) <= 1000
            next_base = headers[-1].next_offset
            assert path.with_suffix(".index").exists() and path.with_suffix(".timeindex").exists()
        assert next_base == 60
        # A small max-bytes fetch from the middle of a segment, and across each boundary.
        values = fetch_values(client, "roll")
        assert [offset for offset, _ in values] == list(range(60))
        for path in files[1:]:
            boundary = int(path.stem)
            code, _, _, records = fetch(client, "roll", 0, boundary - 1, max_bytes=100_000)
            assert code == 0 and records
    broker.kill()
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert [o for o, _ in fetch_values(client, "roll")] == list(range(60))
        fill(client, "roll", 5, start=60)


def test_old_create_time_records_do_not_roll_a_segment_per_batch(broker):
    """segment.ms compares record timestamps with the segment's first one, as Kafka does;
    historical data (timestamps older than segment.ms) must not roll on every append."""
    old = int(time.time() * 1000) - 10 * DAY_MS
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "history", configs={"segment.ms": str(DAY_MS), "retention.ms": "-1"})
        fill(client, "history", 20, timestamp_ms=lambda n: old + n)
        assert len(segments(broker, "history")) == 1
        # Records that are segment.ms newer than the segment's first one do roll it.
        fill(client, "history", 1, start=20, timestamp_ms=lambda n: old + DAY_MS + 1000)
        assert len(segments(broker, "history")) == 2


def test_retention_by_size_deletes_oldest_segments(broker):
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "sized", configs={"segment.bytes": "1000", "retention.bytes": "3000"})
        fill(client, "sized", 80)
        wait_until(lambda: earliest(client, "sized") > 0, 10, 0.02)
        time.sleep(0.2)  # a few more retention passes: nothing more should go
        files = segments(broker, "sized")
        total = sum(path.stat().st_size for path in files)
        sizes_without_oldest = total - files[0].stat().st_size
        assert sizes_without_oldest < 3000 <= total or len(files) == 1
        start = earliest(client, "sized")
        assert start == int(files[0].stem)
        values = fetch_values(client, "sized")
        assert [o for o, _ in values] == list(range(start, 80))
        assert list_offset(client, "sized", 0, -1)[1] == 80
        assert fetch(client, "sized", 0, 0)[0] == 1  # OFFSET_OUT_OF_RANGE below the start
    broker.kill()
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert earliest(client, "sized") == start
        fill(client, "sized", 1, start=80)


def test_retention_by_time_deletes_expired_segments_but_never_the_active_one(broker):
    now = int(time.time() * 1000)
    with WireClient(broker.bootstrap) as client:
        create_topic(
            client, "timed", configs={"segment.bytes": "1000", "retention.ms": str(HOUR_MS)}
        )
        # Old records (two hours ago), then fresh ones.
        fill(client, "timed", 30, timestamp_ms=lambda n: now - 2 * HOUR_MS + n)
        fill(client, "timed", 30, start=30, timestamp_ms=lambda n: now + n)
        wait_until(lambda: earliest(client, "timed") > 0, 10, 0.02)
        time.sleep(0.2)
        start = earliest(client, "timed")
        assert start <= 30, "a segment holding fresh records was deleted"
        assert [o for o, _ in fetch_values(client, "timed")] == list(range(start, 60))
        remaining = segments(broker, "timed")
        assert int(remaining[0].stem) == start

        # Everything expired: every closed segment goes, the active one stays.
        create_topic(client, "expired", configs={"retention.ms": "1"})
        fill(client, "expired", 5, timestamp_ms=lambda n: now - HOUR_MS)
        time.sleep(0.3)
        assert len(segments(broker, "expired")) == 1
        assert earliest(client, "expired") == 0
        assert [o for o, _ in fetch_values(client, "expired")] == list(range(5))


def test_delete_records_moves_log_start_and_survives_restart(broker):
    def delete_before(client: WireClient, offset: int) -> tuple[int, int]:
        response = client.request(
            DeleteRecordsRequest,
            topics=(
                DeleteRecordsTopic(
                    name="deleted",
                    partitions=(DeleteRecordsPartition(partition_index=0, offset=offset),),
                ),
            ),
            timeout=datetime.timedelta(seconds=5),
        )
        (answer,) = response.topics[0].partitions
        return int(answer.error_code), answer.low_watermark

    with WireClient(broker.bootstrap) as client:
        create_topic(client, "deleted", configs={"segment.bytes": "1000"})
        fill(client, "deleted", 40)
        before = len(segments(broker, "deleted"))
        assert delete_before(client, 25) == (0, 25)
        assert earliest(client, "deleted") == 25
        assert len(segments(broker, "deleted")) < before  # whole segments below 25 gone
        assert int(segments(broker, "deleted")[0].stem) <= 25
        assert [o for o, _ in fetch_values(client, "deleted")] == list(range(25, 40))
        assert delete_before(client, 10) == (0, 25)  # never moves backwards
        assert delete_before(client, 41)[0] == 1  # beyond the high watermark
        assert delete_before(client, -5)[0] == 1
    broker.kill()  # no clean shutdown: the checkpoint must already be durable
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert earliest(client, "deleted") == 25
        assert list_offset(client, "deleted", 0, -1)[1] == 40
        assert fetch(client, "deleted", 0, 24)[0] == 1
        assert delete_before(client, -1) == (0, 40)  # -1: up to the high watermark
    broker.stop()
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert earliest(client, "deleted") == 40
        assert fetch_values(client, "deleted") == []
        fill(client, "deleted", 2, start=40)
        assert [o for o, _ in fetch_values(client, "deleted")] == [40, 41]


def test_list_offsets_by_timestamp_across_segments_and_restart(broker):
    base = int(time.time() * 1000) - HOUR_MS
    with WireClient(broker.bootstrap) as client:
        create_topic(
            client,
            "clock",
            configs={"segment.bytes": "1000", "index.interval.bytes": "200"},
        )
        fill(client, "clock", 50, timestamp_ms=lambda n: base + n * 10)

        def check() -> None:
            for target, expected in [
                (base - 1, 0),
                (base, 0),
                (base + 1, 1),
                (base + 255, 26),
                (base + 490, 49),
            ]:
                code, offset, timestamp = list_offset(client, "clock", 0, target)
                assert (code, offset, timestamp) == (0, expected, base + expected * 10)
            assert list_offset(client, "clock", 0, base + 491)[:2] == (0, -1)
            # -3: the record with the largest timestamp (KIP-734).
            assert list_offset(client, "clock", 0, -3)[:3] == (0, 49, base + 490)

        check()
    broker.kill()
    for index in (broker.data_dir / "clock-0").glob("*.timeindex"):
        index.write_bytes(b"garbage")  # rebuilt from the log on recovery
    broker.start()
    with WireClient(broker.bootstrap) as client:
        check()
