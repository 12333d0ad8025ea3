"""Java exactly-once applications against onceflow's broker, SIGKILLed mid-run, audited.

``tests/java/EosCopyLoop.java`` is Kafka's consume-transform-produce loop with the Java
clients (read_committed consumer, transactional producer, offsets sent to the
transaction with the group's metadata). ``tests/java/EosStreamsApp.java`` is a Kafka
Streams application with ``processing.guarantee=exactly_once_v2`` and a state store
(a count per key, restored from its changelog after a crash). Each is killed with
SIGKILL three times while it works and restarted; then a read_committed consumer reads
the whole output and checks every input record appears exactly once, in its key's
order, and (Streams) that each key's running count matches the record's position.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from onceflow.broker.process import BrokerProcess
from tests.integration.java_tools import JavaProcess, JavaProcesses, compile_java

RECORDS = 1500
KEYS = 30
PARTITIONS = 3
KILLS = 3
PROGRESS = 150  # records an instance handles before it is killed
BROKER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java(
        tmp_path_factory.mktemp("java-classes"), "EosCopyLoop.java", "EosStreamsApp.java"
    )


@pytest.fixture
def java(java_classpath: str, tmp_path: Path) -> Iterator[JavaProcesses]:
    processes = JavaProcesses(java_classpath, tmp_path)
    yield processes
    processes.close()


def prepare(bootstrap: str) -> dict[str, list[str]]:
    """Topics ``input`` and ``output``; the input's values per key, in produce order."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(name, PARTITIONS, 1) for name in ("input", "output")]
    for future in admin.create_topics(topics).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values: dict[str, list[str]] = defaultdict(list)
    for number in range(RECORDS):
        key = f"k{number % KEYS}"
        value = f"{key}:{len(values[key])}"
        values[key].append(value)
        producer.produce("input", value.encode(), key.encode())
    assert producer.flush(30) == 0
    return values


def read_output(bootstrap: str, at_least: int, timeout: float) -> list[tuple[str, str]]:
    """(key, value) of every committed output record, once ``at_least`` are there and
    each partition was read to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "auditor",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("output", p, 0) for p in range(PARTITIONS)])
    records: list[tuple[str, str]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(records) < at_least or len(at_end) < PARTITIONS:
        if time.monotonic() > deadline:
            break
        for message in consumer.consume(1000, 0.5):
            error = message.error()
            if error is None:
                records.append((message.key().decode(), message.value().decode()))
                at_end.discard(message.partition())
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
    consumer.close()
    return records


def audit(input_values: dict[str, list[str]], output: list[tuple[str, str]], counted: bool) -> None:
    by_key: dict[str, list[str]] = defaultdict(list)
    for key, value in output:
        by_key[key].append(value)
    assert len(output) == RECORDS, f"{len(output)} output records for {RECORDS} inputs"
    for key, values in input_values.items():
        copied = [value.split(";")[0] for value in by_key[key]]
        assert copied == values, f"key {key}: output {copied[:5]}... is not its input in order"
        if counted:
            counts = [int(value.split(";")[1]) for value in by_key[key]]
            assert counts == list(range(1, len(values) + 1)), f"key {key}: counts {counts}"


def kill_while_working(
    start: Callable[[], JavaProcess], progress: Callable[[list[dict[str, Any]]], int]
) -> JavaProcess:
    """Starts the app, SIGKILLs it ``KILLS`` times once it has handled ``PROGRESS``
    records (or has nothing left), and returns the last, running instance."""
    app = start()
    for _ in range(KILLS):
        app.wait_for(lambda events: progress(events) >= PROGRESS, 120, f"{PROGRESS} records")
        app.kill()
        app = start()
    return app


def test_java_clients_exactly_once_loop(
    kafka_broker_factory: Callable[..., BrokerProcess], java: JavaProcesses
) -> None:
    bootstrap = kafka_broker_factory(BROKER_CONFIG).bootstrap
    input_values = prepare(bootstrap)
    starts = iter(range(1, 100))

    def start() -> JavaProcess:
        args = [bootstrap, "input", "output", "eos-loop", "eos-loop-txn"]
        return java.start("EosCopyLoop", args, f"eos-loop-{next(starts)}")

    def committed(events: list[dict[str, Any]]) -> int:
        return max((e["committed"] for e in events if "committed" in e), default=0)

    app = kill_while_working(start, committed)
    read_output(bootstrap, RECORDS, 120)  # until the last instance has caught up
    app.stop()
    audit(input_values, read_output(bootstrap, 0, 60), counted=False)


def test_kafka_streams_exactly_once_v2(
    kafka_broker_factory: Callable[..., BrokerProcess], java: JavaProcesses, tmp_path: Path
) -> None:
    bootstrap = kafka_broker_factory(BROKER_CONFIG).bootstrap
    input_values = prepare(bootstrap)
    starts = iter(range(1, 100))

    def start() -> JavaProcess:
        args = [bootstrap, "eos-streams", str(tmp_path / "state"), "input", "output"]
        return java.start("EosStreamsApp", args, f"eos-streams-{next(starts)}")

    def processed(events: list[dict[str, Any]]) -> int:
        return max((e["processed"] for e in events if "processed" in e), default=0)

    app = kill_while_working(start, processed)
    read_output(bootstrap, RECORDS, 120)  # until the last instance has caught up
    app.stop()
    audit(input_values, read_output(bootstrap, 0, 60), counted=True)
