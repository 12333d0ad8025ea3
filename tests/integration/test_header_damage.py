"""A flipped byte in any header field of any batch is never served.

A small multi-segment log is written by a real broker and stopped cleanly, so every record
is acknowledged and below the recovery point. Then, for every batch and every field of the
v2 batch header (those the CRC covers and those it does not), one byte of the field is
flipped in a copy of the data directory, and:

- ``onceflow log check`` exits 1 and names the partition as damaged, and the file;
- a real broker serves no record at an offset other than the one it was acknowledged at
  and no offset that was never acknowledged (a real consumer and a raw fetch compare every
  record with what was produced); the partition goes offline (KAFKA_STORAGE_ERROR) at
  start-up or at the latest when the damaged batch is fetched, and nothing is cut.

With the recovery point moved before the damaged batch (the rest was never acknowledged),
the broker cuts the tail from the damaged batch on, with a quarantine copy, and serves
the records before it at their offsets.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from onceflow.cli.log import log_command
from onceflow.log.batch import parse_header
from onceflow.log.manager import (
    RECOVERY_POINT_FILE,
    read_recovery_points,
    write_recovery_point_file,
)
from onceflow.log.power_loss import HEADER_FIELDS
from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import BrokerProcess
from tests.kit.batches import decode, record_batch
from tests.kit.wire import create_topic, fetch, produce

pytestmark = pytest.mark.xdist_group("header-damage")

TOPIC = "walk"
BATCHES = 5
RECORDS_PER_BATCH = 2


def _serve(data_dir: Path, port_file: Path, log_path: Path) -> None:
    """A broker on a port of its own choosing, in a child of a single-threaded fork server."""
    logging.basicConfig(
        filename=log_path, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    from onceflow.broker.broker import Broker
    from onceflow.config import BrokerConfig

    async def serve() -> None:
        broker = Broker(data_dir, "127.0.0.1", 0, BrokerConfig.from_strings({}))
        await broker.start()
        port_file.with_suffix(".tmp").write_text(str(broker.port))
        port_file.with_suffix(".tmp").rename(port_file)
        await asyncio.Event().wait()

    asyncio.run(serve())


class QuickBroker:
    """A real broker process that starts in a fraction of a second (forked, not exec'd)."""

    def __init__(self, root: Path) -> None:
        self.data_dir = root / "data"
        self.log_path = root / "broker.log"
        self.port_file = root / "port"
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["onceflow.broker.broker"])
        self.process: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        args = (self.data_dir, self.port_file, self.log_path)
        self.process = self.context.Process(target=_serve, args=args, daemon=True)
        self.process.start()
        deadline = time.monotonic() + 30
        while not self.port_file.exists():
            assert self.process.is_alive(), f"broker died; see {self.log_path}"
            assert time.monotonic() < deadline, f"broker did not start; see {self.log_path}"
            time.sleep(0.02)
        self.bootstrap = f"127.0.0.1:{self.port_file.read_text()}"

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join()


def value(batch: int, record: int) -> bytes:
    return f"b{batch}-r{record}".encode()


ACKED = {
    batch * RECORDS_PER_BATCH + record: value(batch, record)
    for batch in range(BATCHES)
    for record in range(RECORDS_PER_BATCH)
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A data directory holding BATCHES batches over several segments, stopped cleanly."""
    root = tmp_path_factory.mktemp("pristine")
    broker = BrokerProcess(root / "data").start()
    try:
        with WireClient(broker.bootstrap) as client:
            assert create_topic(client, TOPIC, 1, configs={"segment.bytes": "200"})[0] == 0
            for batch in range(BATCHES):
                records = record_batch([value(batch, r) for r in range(RECORDS_PER_BATCH)])
                assert produce(client, TOPIC, 0, records) == (0, batch * RECORDS_PER_BATCH)
    finally:
        broker.stop()
    segments = sorted((root / "data" / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3, "the log must span several segments"
    points = read_recovery_points(root / "data" / RECOVERY_POINT_FILE)
    assert points[(TOPIC, 0)] == len(ACKED)
    return root / "data"


def batch_positions(data_dir) -> list[tuple[str, int, int]]:
    """(segment file name, byte position, base offset) of every batch of the partition."""
    found = []
    for path in sorted((data_dir / f"{TOPIC}-0").glob("*.log")):
        data = path.read_bytes()
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            found.append((path.name, position, header.base_offset))
            position += header.size
    return found


CASES = [
    (batch, name, at, size)
    for batch in range(BATCHES)
    for name, at, size in HEADER_FIELDS
    # the most significant byte of the field in even batches, the least in odd ones
]


def flip(path, position: int, field_at: int, size: int, batch: int) -> None:
    byte = field_at if batch % 2 == 0 else field_at + size - 1
    with open(path, "r+b") as handle:
        handle.seek(position + byte)
        old = handle.read(1)[0]
        handle.seek(position + byte)
        handle.write(bytes([old ^ 0xFF]))


def log_check(data_dir):
    return CliRunner().invoke(log_command, ["check", "--data-dir", str(data_dir)])


def consume_with_a_real_client(
    bootstrap: str, expected: int, idle_s: float = 1.5, grace_s: float = 0.3
) -> list[tuple[int, bytes]]:
    """What a real consumer gets from offset 0: until nothing came for ``idle_s``, or for
    ``grace_s`` once it has the ``expected`` records the broker may serve (anything more
    would come right after them)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "walker",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "reconnect.backoff.ms": 20,
            "retry.backoff.ms": 20,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    received: list[tuple[int, bytes]] = []
    try:
        last = time.monotonic()
        while len(received) < len(ACKED):
            quiet = time.monotonic() - last
            if quiet >= idle_s or (len(received) >= expected and quiet >= grace_s):
                break
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            received.append((message.offset(), message.value()))
            last = time.monotonic()
    finally:
        consumer.close()
    return received


def raw_fetch_until_error(bootstrap: str) -> tuple[list[tuple[int, bytes]], int]:
    """Every record a raw fetch from offset 0 serves, and the error that stopped it."""
    served: list[tuple[int, bytes]] = []
    offset = 0
    with WireClient(bootstrap) as client:
        while True:
            code, high_watermark, _, records = fetch(client, TOPIC, 0, offset)
            if code != 0:
                return served, code
            batch = [(o, v) for o, v in decode(records) if o >= offset]
            if not batch:
                return served, code
            assert high_watermark <= len(ACKED)
            served += batch
            offset = batch[-1][0] + 1


def assert_only_acknowledged(served: list[tuple[int, bytes]]) -> None:
    for offset, payload in served:
        assert offset in ACKED, f"offset {offset} was never acknowledged"
        assert ACKED[offset] == payload, f"offset {offset} holds {payload!r}"


@pytest.mark.parametrize(("batch", "field", "at", "size"), CASES)
def test_a_flipped_header_byte_below_the_recovery_point_is_never_served(
    pristine, tmp_path, batch, field, at, size
):
    broker = QuickBroker(tmp_path)
    shutil.copytree(pristine, broker.data_dir)
    segment, position, _ = batch_positions(broker.data_dir)[batch]
    path = broker.data_dir / f"{TOPIC}-0" / segment
    flip(path, position, at, size, batch)
    damaged = path.read_bytes()

    checked = log_check(broker.data_dir)
    assert checked.exit_code == 1, checked.output
    assert f"{TOPIC}-0: damaged: " in checked.output, checked.output

    broker.start()
    try:
        served = consume_with_a_real_client(broker.bootstrap, batch * RECORDS_PER_BATCH)
        assert_only_acknowledged(served)
        fetched, code = raw_fetch_until_error(broker.bootstrap)
        assert_only_acknowledged(fetched)
        assert code == ErrorCode.corrupt_message  # offline, found at the latest now
        assert len(fetched) < len(ACKED)
        with WireClient(broker.bootstrap) as client:
            assert produce(client, TOPIC, 0, record_batch([b"x"]))[0] == (
                ErrorCode.kafka_storage_error
            )
    finally:
        broker.kill()
    assert path.read_bytes() == damaged  # nothing was cut
    assert not (broker.data_dir / "quarantine").exists()


@pytest.mark.parametrize(("batch", "field", "at", "size"), CASES)
def test_a_flipped_header_byte_after_the_recovery_point_is_cut_with_a_copy(
    pristine, tmp_path, batch, field, at, size
):
    broker = QuickBroker(tmp_path)
    shutil.copytree(pristine, broker.data_dir)
    segment, position, base = batch_positions(broker.data_dir)[batch]
    # Only the batches before the damaged one were acknowledged (as after a crash).
    points_path = broker.data_dir / RECOVERY_POINT_FILE
    write_recovery_point_file(points_path, {(TOPIC, 0): base})
    acknowledged = {offset: v for offset, v in ACKED.items() if offset < base}
    path = broker.data_dir / f"{TOPIC}-0" / segment
    flip(path, position, at, size, batch)
    damaged = path.read_bytes()

    checked = log_check(broker.data_dir)
    assert checked.exit_code == 1, checked.output  # found (start-up cuts it by itself)
    assert f"{TOPIC}-0: torn tail: " in checked.output, checked.output

    broker.start()
    try:
        served = consume_with_a_real_client(broker.bootstrap, len(acknowledged))
        assert dict(served) == acknowledged
        with WireClient(broker.bootstrap) as client:
            assert produce(client, TOPIC, 0, record_batch([b"x"])) == (0, base)
    finally:
        broker.kill()
    # Cut where the damaged batch began (the new record follows), with a copy of the cut.
    assert path.read_bytes()[:position] == damaged[:position]
    assert parse_header(path.read_bytes(), position).base_offset == base
    copies = sorted((broker.data_dir / "quarantine" / f"{TOPIC}-0").glob("*.log"))
    assert copies[0].read_bytes() == damaged[position:]
    assert "cut the tail" in broker.log_path.read_text()
