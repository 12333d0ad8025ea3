"""Burrow (LinkedIn's consumer-lag checker, Debian's `burrow` package) reports a group's exact
lag against the embedded broker. Burrow insists on a ZooKeeper for its own coordination;
Debian's `zookeeper` package provides one (both installed by scripts/system-deps.sh).

Burrow's sarama asks for partition ends with ListOffsets v0, which Kafka 4.0 dropped and
onceflow serves as Kafka 3.x does; without it Burrow sees no offsets and no groups.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.ports import free_port

BURROW = shutil.which("Burrow") or "/usr/bin/Burrow"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")

pytestmark = pytest.mark.skipif(
    not (Path(BURROW).exists() and ZOOKEEPER_JAR.exists()),
    reason="needs Debian's burrow and zookeeper packages (make system-deps)",
)


def zookeeper_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as connection:
            connection.sendall(b"srvr")
            return b"Mode" in connection.recv(500)
    except OSError:
        return False


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        [
            "java",
            "-cp",
            str(ZOOKEEPER_JAR),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(port),
            str(tmp_path / "zookeeper"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not zookeeper_ready(port):
            assert process.poll() is None and time.monotonic() < deadline, "no ZooKeeper"
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(10)


BURROW_CONFIG = """\
[general]
pidfile="{directory}/burrow.pid"
[logging]
filename="{directory}/burrow.log"
level="info"
[zookeeper]
servers=["127.0.0.1:{zookeeper}"]
timeout=6
root-path="/burrow"
[client-profile.onceflow]
client-id="burrow"
kafka-version="1.0.0"
[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="onceflow"
topic-refresh=5
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="onceflow"
group-blacklist="^$"
[httpserver.default]
address="127.0.0.1:{http}"
[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
"""


def test_burrow_reports_the_exact_lag(kafka_broker, zookeeper, tmp_path: Path) -> None:
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for _ in range(10):
        producer.produce("lagging", value=b"x", partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "lag-group"})
    consumer.commit(offsets=[TopicPartition("lagging", 0, 4)], asynchronous=False)
    consumer.close()

    http = free_port()
    config = BURROW_CONFIG.format(
        directory=tmp_path, zookeeper=zookeeper, bootstrap=kafka_broker.bootstrap, http=http
    )
    (tmp_path / "burrow.toml").write_text(config)
    burrow = subprocess.Popen(
        [BURROW, "--config-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{http}/v3/kafka/local/consumer/lag-group/lag"
    try:
        answer = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    answer = json.load(response)
                if answer["status"]["partitions"]:
                    break
            except (urllib.error.URLError, ConnectionError):
                assert burrow.poll() is None, (tmp_path / "burrow.log").read_text()
                time.sleep(0.5)
        assert answer is not None, (tmp_path / "burrow.log").read_text()[-3000:]
    finally:
        burrow.terminate()
        burrow.wait(10)
    assert answer["error"] is False
    (partition,) = answer["status"]["partitions"]
    assert (partition["topic"], partition["partition"]) == ("lagging", 0)
    assert partition["end"]["offset"] == 4
    assert partition["current_lag"] == 6
