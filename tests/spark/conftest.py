"""One SparkSession (local[2]) for every Spark test, the engines a test can run on
(onceflow's broker, Apache Kafka's 3-node cluster), plus small Kafka helpers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402

from onceflow.kafka_cluster.probe import node_metadata  # noqa: E402
from onceflow.testing import APACHE_KAFKA_GROUP  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """One SparkSession per test process (each xdist worker has its own)."""
    from onceflow.spark.session import java_home, local_session

    if java_home() is None:
        pytest.skip("Spark tests need Java (none on PATH and JAVA_HOME unset)")
    session = local_session(
        "onceflow-tests",
        config={
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stopTimeout": "10s",
            "spark.sql.session.timeZone": "UTC",
        },
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _active_session(request: pytest.FixtureRequest) -> None:
    """Each Spark test starts with the shared session active on its thread.

    Spark looks onceflow's data sources up through the calling thread's active session, a
    JVM thread-local (see ``onceflow.spark.activate``); a test whose py4j call was cut by
    an exception leaves the test thread on a new JVM thread without one, and the next
    test's ``format("onceflow-database")`` would not be found.
    """
    if "spark" not in request.fixturenames:
        return
    from onceflow.spark import activate

    activate(request.getfixturevalue("spark"))


# `@pytest.mark.parametrize("engine", ENGINES, indirect=True)`: the test runs once on a
# fresh onceflow broker and once on the session's Apache Kafka cluster (whose tests share
# one xdist worker).
ENGINES = [
    pytest.param("onceflow", id="onceflow"),
    pytest.param(
        "apache-kafka", id="apache-kafka", marks=pytest.mark.xdist_group(APACHE_KAFKA_GROUP)
    ),
]


@dataclass(frozen=True)
class Engine:
    name: str
    bootstrap: str
    cluster: Any = None  # onceflow.kafka_cluster.KafkaCluster on apache-kafka


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> Engine:
    """A broker that runs transactions: onceflow's (fresh per test) or Apache Kafka's."""
    if request.param == "onceflow":
        return Engine("onceflow", request.getfixturevalue("txn_broker").bootstrap)
    cluster = request.getfixturevalue("apache_kafka_cluster")
    cluster.heal()
    return Engine("apache-kafka", cluster.bootstrap, cluster)


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    """A topic replicated on up to three brokers (RF=3 on a cluster: with its
    min.insync.replicas=2), known to every broker when this returns."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = admin.list_topics(timeout=15).brokers.values()
    replicas = min(3, len(brokers))
    new = NewTopic(name, partitions, replicas, config=config)
    for future in admin.create_topics([new]).values():
        future.result(15)
    if replicas > 1:
        for broker in brokers:
            wait_until(lambda b=broker: _knows(f"{b.host}:{b.port}", name, partitions), 30)


def _knows(address: str, topic: str, partitions: int) -> bool:
    """The broker at ``address`` knows a leader for every partition of ``topic``."""
    try:
        leaders = node_metadata(address, (topic,)).leaders.get(topic, {})
    except OSError:
        return False
    return len(leaders) == partitions and all(leader >= 0 for leader in leaders.values())


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(name, total)]).values():
        future.result(15)


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    partition: int | None = None,
    key: bytes | None = None,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all"})
    for value in values:
        kwargs = {"value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if key is not None:
            kwargs["key"] = key
        if headers is not None:
            kwargs["headers"] = headers
        producer.produce(topic, **kwargs)
    assert producer.flush(15) == 0


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"spark-test-{uuid.uuid4().hex}",
            "linger.ms": 1,
        }
    )
    producer.init_transactions(10)
    return producer


def transactions_supported(bootstrap: str) -> str | None:
    """None if the broker runs confluent-kafka transactions, else the reason it does not."""
    try:
        transactional_producer(bootstrap)
    except KafkaException as error:
        return f"broker does not support confluent-kafka transactions yet: {error}"
    return None


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def txn_broker(kafka_broker):
    """``kafka_broker`` when it supports transactions; skip the test otherwise."""
    reason = transactions_supported(kafka_broker.bootstrap)
    if reason is not None:
        pytest.skip(reason)
    return kafka_broker


def wait_until(condition, timeout: float = 60.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
