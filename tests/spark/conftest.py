"""One SparkSession (local[2]) for every Spark test, plus small Kafka helpers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402


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


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        future.result(15)


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
