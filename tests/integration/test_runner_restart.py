"""The Runner example of docs/patterns.md, as the doc writes it, SIGKILLed and restarted.

The example is read from the doc at test time; only its addresses and names are replaced
(the broker, the database, the topic and group). With its ``worker_id`` the restarted
process takes the dead one's place at once (static membership) under Kafka's default
session timeout (45 s): every partition is processing again within seconds. Without it the
dead member holds its partitions until its session expires. On a KIP-848 group
(``group.protocol=consumer``) a crashed static member's id is refused until its session
expires; the restarted Runner keeps joining instead of dying and gets its partitions then.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.db import connect
from onceflow.testing import APACHE_KAFKA_GROUP, BrokerProcess
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
BACK_WITHIN_S = 5.0
WORKER_ID = '        worker_id=os.environ.get("WORKER_ID", "1"),'


def doc_example() -> str:
    """The first Python block of docs/patterns.md's section "The runner"."""
    text = (ROOT / "docs" / "patterns.md").read_text()
    section = text[text.index("## The runner") :]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def example(bootstrap: str, database_url: str, topic: str, edit: Callable[[str], str]) -> str:
    code = doc_example()
    for literal, value in (
        ('"127.0.0.1:9092"', bootstrap),
        ('"postgresql://app@127.0.0.1/app"', database_url),
        ('"orders"', topic),  # topics=[...] and group_id
    ):
        assert literal in code, f"docs/patterns.md's Runner example has no {literal} any more"
        code = code.replace(literal, repr(value))
    return edit(code)


def as_written(code: str) -> str:
    return code


def worker_id_line(code: str) -> str:
    lines = [line for line in code.splitlines(keepends=True) if line.startswith(WORKER_ID)]
    assert len(lines) == 1, "the doc example's worker_id line changed"
    return lines[0]


def without_worker_id(code: str) -> str:
    return code.replace(worker_id_line(code), "")


def with_kip848(code: str) -> str:
    line = worker_id_line(code)
    return code.replace(line, line + '        consumer_config={"group.protocol": "consumer"},\n')


class Orders:
    """The example's input topic and its orders table."""

    def __init__(self, bootstrap: str, topic: str, database_url: str) -> None:
        self.topic = topic
        self.database_url = database_url
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.sent = 0
        with connect(database_url) as db:
            db.script(["CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)"])

    def send_one_per_partition(self) -> set[int]:
        ids = set()
        for partition in range(PARTITIONS):
            self.sent += 1
            ids.add(self.sent)
            value = json.dumps({"id": self.sent, "total": 10 * self.sent}).encode()
            self.producer.produce(self.topic, value, key=b"k", partition=partition)
        assert self.producer.flush(10) == 0
        return ids

    def stored(self) -> set[int]:
        with connect(self.database_url) as db:
            return {row[0] for row in db.execute("SELECT id FROM orders").fetchall()}

    def wait_for(self, ids: set[int], timeout: float) -> float | None:
        """Seconds until every order of ``ids`` is in the table; None after ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if ids <= self.stored():
                return time.monotonic() - started
            time.sleep(0.05)
        return None


@contextmanager
def running(code: str, directory: Path) -> Iterator[Callable[[], subprocess.Popen]]:
    """Start the example as its own process (again with each call); killed at the end."""
    script = directory / "orders_worker.py"
    script.write_text(code)
    log = directory / "worker.log"
    processes: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        with open(log, "a") as output:
            processes.append(subprocess.Popen([sys.executable, str(script)], cwd=directory,
                                              stdout=output, stderr=output))  # fmt: skip
        return processes[-1]

    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()


def sigkill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    assert process.wait(10) == -signal.SIGKILL


def start_then_kill(start: Callable[[], subprocess.Popen], orders: Orders, log: Path) -> None:
    """Run the example until it processes an order on every partition, then SIGKILL it."""
    first = start()
    assert orders.wait_for(orders.send_one_per_partition(), 60) is not None, log.read_text()
    sigkill(first)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.db'}"


@pytest.mark.parametrize(
    "engine,database",
    [
        ("onceflow", "sqlite"),
        ("onceflow", "postgresql"),
        pytest.param("apache-kafka", "sqlite", marks=pytest.mark.xdist_group(APACHE_KAFKA_GROUP)),
    ],
)
def test_the_doc_example_restarted_after_sigkill_gets_its_partitions_back_at_once(
    request, tmp_path, engine, database
):
    url = request.getfixturevalue("sqlite_url" if database == "sqlite" else "postgres_url")
    if engine == "onceflow":
        bootstrap = request.getfixturevalue("kafka_session_broker").bootstrap
        topic = request.getfixturevalue("kafka_topic_factory")(partitions=PARTITIONS)
    else:
        bootstrap = request.getfixturevalue("apache_kafka_cluster").bootstrap
        topic = request.getfixturevalue("apache_kafka_topic_factory")(partitions=PARTITIONS)
    orders = Orders(bootstrap, topic, url)
    code = example(bootstrap, url, topic, as_written)
    with running(code, tmp_path) as start:
        start_then_kill(start, orders, tmp_path / "worker.log")
        start()
        took = orders.wait_for(orders.send_one_per_partition(), 60)
        log = (tmp_path / "worker.log").read_text()
        assert took is not None, log
        assert took < BACK_WITHIN_S, f"partitions back after {took:.1f} s\n{log}"


def test_without_a_worker_id_the_dead_member_keeps_its_partitions(
    kafka_session_broker: BrokerProcess, kafka_topic_factory, tmp_path, sqlite_url
):
    """The control: the same example without its worker_id line waits for the session."""
    topic = kafka_topic_factory(partitions=PARTITIONS)
    orders = Orders(kafka_session_broker.bootstrap, topic, sqlite_url)
    code = example(kafka_session_broker.bootstrap, sqlite_url, topic, without_worker_id)
    with running(code, tmp_path) as start:
        start_then_kill(start, orders, tmp_path / "worker.log")
        start()
        took = orders.wait_for(orders.send_one_per_partition(), 2 * BACK_WITHIN_S)
        assert took is None, f"a dynamic member got the partitions back after {took:.1f} s"


def test_on_a_kip848_group_the_restarted_worker_waits_for_the_dead_ones_session(
    kafka_broker_factory, kafka_topic_factory, tmp_path, sqlite_url
):
    """group.protocol=consumer refuses the instance id while the killed member's session
    lasts (a fatal error in librdkafka); the Runner joins again until it is released.
    The broker's session is 8 s here (Kafka's is 45 s and not the client's to change)."""
    session_s = 8
    broker = kafka_broker_factory({"group.consumer.session.timeout.ms": str(session_s * 1000)})
    topic = kafka_topic_factory(partitions=PARTITIONS, broker=broker)
    orders = Orders(broker.bootstrap, topic, sqlite_url)
    code = example(broker.bootstrap, sqlite_url, topic, with_kip848)
    log = tmp_path / "worker.log"
    with running(code, tmp_path) as start:
        start_then_kill(start, orders, log)
        restarted = start()
        took = orders.wait_for(orders.send_one_per_partition(), 6 * session_s)
        assert took is not None, log.read_text()
        assert restarted.poll() is None, log.read_text()
        assert "joining again" in log.read_text()
        assert session_s - 3 < took < 3 * session_s, f"back after {took:.1f} s"
