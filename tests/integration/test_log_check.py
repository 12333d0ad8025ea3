"""Damage in a real broker's data directory: a flipped byte in acknowledged data takes the
partition offline (KAFKA_STORAGE_ERROR, an ERROR log, nothing cut) while the rest of the
broker keeps serving; `onceflow log check` reports it and `--repair` cuts it with a
quarantine copy. A torn tail after the recovery point is cut at start-up, loudly. One
process at a time holds a data directory."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from onceflow.log.batch import parse_header
from onceflow.log.dir_lock import DataDirInUse, DataDirLock
from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import BrokerProcess
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, fetch, fetch_values, produce


def log_check(data_dir, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "onceflow", "log", "check", "--data-dir", str(data_dir)]
    return subprocess.run([*command, *extra], capture_output=True, text=True, timeout=60)


def fill(broker: BrokerProcess, topic: str, partitions: int, count: int) -> None:
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, topic, partitions)[0] == 0
        for number in range(count):
            for partition in range(partitions):
                code, _ = produce(client, topic, partition, record_batch([f"v{number}".encode()]))
                assert code == 0


def flip_byte_in_batch(path, batch_number: int) -> None:
    data = bytearray(path.read_bytes())
    position = 0
    for _ in range(batch_number):
        position += parse_header(data, position).size
    data[position + parse_header(data, position).size - 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_acknowledged_data_is_kept_offline_until_repaired(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    fill(broker, "rot", 2, 10)
    broker.stop()  # a clean stop: the recovery point covers all ten batches
    segment = tmp_path / "data" / "rot-0" / f"{0:020d}.log"
    flip_byte_in_batch(segment, 3)
    damaged_bytes = segment.read_bytes()

    checked = log_check(tmp_path / "data")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "rot-0: damaged" in checked.stdout and "CRC mismatch in the batch at offset 3" in (
        checked.stdout
    )
    assert "rot-1: ok" in checked.stdout

    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert len(fetch_values(client, "rot", 1)) == 10  # the other partition serves on
        code, *_ = fetch(client, "rot", 0, 0)
        assert code == ErrorCode.corrupt_message  # offline: a fetch of damaged data
        code, _ = produce(client, "rot", 0, record_batch([b"more"]))
        assert code == ErrorCode.kafka_storage_error
    broker.stop()
    assert segment.read_bytes() == damaged_bytes  # nothing was cut
    assert "ERROR" in broker.log_path.read_text() and "rot-0 is offline" in (
        broker.log_path.read_text()
    )

    repaired = log_check(tmp_path / "data", "--repair")
    # Acknowledged records were cut: the repair says what, and exits 1.
    assert repaired.returncode == 1, repaired.stdout + repaired.stderr
    (copy,) = (tmp_path / "data" / "quarantine" / "rot-0").glob("*.log")
    assert (
        "cut rot-0 from offset 3: acknowledged offsets 3-9 (below the recovery point 10) are "
        "gone; offsets 3-9 as far as readable (7 records in 7 batches), "
        f"{copy.stat().st_size} bytes; the cut bytes are in {copy}"
    ) in repaired.stdout
    assert "repaired: rot-0: ok" in repaired.stdout and "new records start at offset 10" in (
        repaired.stdout
    )
    assert "1 damaged, 1 repaired" in repaired.stdout
    assert damaged_bytes == segment.read_bytes() + copy.read_bytes()
    assert log_check(tmp_path / "data").returncode == 0
    broker.start()
    with WireClient(broker.bootstrap) as client:
        # The cut offsets 3-9 are never handed out again: new records start at 10.
        assert produce(client, "rot", 0, record_batch([b"after"])) == (0, 10)
        assert fetch_values(client, "rot", 0) == [
            (0, b"v0"),
            (1, b"v1"),
            (2, b"v2"),
            (10, b"after"),
        ]
    broker.stop()
    broker.start()  # the skipped range survives a restart
    with WireClient(broker.bootstrap) as client:
        assert [offset for offset, _ in fetch_values(client, "rot", 0)] == [0, 1, 2, 10]
    broker.stop()


def test_a_torn_tail_after_a_crash_is_cut_at_start_up_with_a_warning(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    fill(broker, "torn", 1, 5)
    broker.kill()  # no clean stop: the recovery point is still where the topic began
    segment = tmp_path / "data" / "torn-0" / f"{0:020d}.log"
    whole = segment.read_bytes()
    segment.write_bytes(whole[:-7])
    checked = log_check(tmp_path / "data")
    assert checked.returncode == 1 and "torn-0: torn tail" in checked.stdout
    assert "0 damaged, 1 with a torn tail" in checked.stdout
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert [v for _, v in fetch_values(client, "torn", 0)] == [
            f"v{n}".encode() for n in range(4)
        ]
    broker.stop()
    log = broker.log_path.read_text()
    assert ("WARNING" in log and "torn-0: incomplete batch" in log) or "running past" in log
    assert "cut the tail after offset 3" in log
    (copy,) = (tmp_path / "data" / "quarantine" / "torn-0").glob("*.log")
    assert whole[:-7] == segment.read_bytes() + copy.read_bytes()


def test_a_data_directory_in_use_is_refused_to_a_second_broker_and_to_log_check(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    fill(broker, "held", 1, 3)
    second = BrokerProcess(tmp_path / "data", log_path=tmp_path / "second.log")
    with pytest.raises(RuntimeError, match="broker did not start"):
        second.start()
    held_by = f"in use by another onceflow process (pid {broker.pid})"
    assert held_by in second.log_path.read_text()
    checked = log_check(tmp_path / "data", "--repair")
    assert checked.returncode == 2 and held_by in checked.stderr, checked.stderr
    with WireClient(broker.bootstrap) as client:  # the first broker serves on
        assert produce(client, "held", 0, record_batch([b"more"])) == (0, 3)
    broker.kill()  # the kernel drops a dead process's lock: nothing stale is left
    assert log_check(tmp_path / "data").returncode == 0
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert len(fetch_values(client, "held", 0)) == 4
    broker.stop()


def test_a_live_broker_holding_the_directory_is_refused_without_waiting(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        started = time.monotonic()
        with pytest.raises(DataDirInUse, match=f"pid {broker.pid}"):
            DataDirLock(tmp_path / "data").acquire(wait_s=5.0)  # what a broker waits
        # The 5 s are for a holder that is exiting; a live one is refused at once.
        assert time.monotonic() - started < 2.0
    finally:
        broker.stop()


def test_a_broker_that_cannot_take_its_port_leaves_no_data_directory(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = BrokerProcess(tmp_path / "new-data", port=port, log_path=tmp_path / "b.log")
        with pytest.raises(RuntimeError, match="broker did not start"):
            broker.start()
    assert "address already in use" in (tmp_path / "b.log").read_text().lower()
    assert not (tmp_path / "new-data").exists()


@pytest.mark.parametrize("content", [[], ["notes.txt"]])
def test_log_check_refuses_a_directory_that_is_no_data_directory(tmp_path, content):
    for name in content:
        (tmp_path / name).write_text("x")
    checked = log_check(tmp_path)
    assert checked.returncode == 2
    assert checked.stderr == f"error: {tmp_path} is not a onceflow data directory\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == content  # nothing created
    assert log_check(tmp_path, "--repair").returncode == 2


def test_log_check_creates_nothing_in_a_data_directory(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    fill(broker, "quiet", 1, 2)
    broker.stop()
    (tmp_path / "data" / ".lock").unlink()  # e.g. a copy of a data directory
    before = sorted(str(path) for path in (tmp_path / "data").rglob("*"))
    assert log_check(tmp_path / "data").returncode == 0
    assert sorted(str(path) for path in (tmp_path / "data").rglob("*")) == before
