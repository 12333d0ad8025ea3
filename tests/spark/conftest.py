"""One SparkSession (local[2]) for every Spark test; the engines a test can run on
(onceflow's broker, Apache Kafka's 3-node cluster) and the Kafka helpers come from the
test kit (``tests.kit``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402

# The kit's helpers and engines, under the names the Spark tests import from here.
from tests.kit.clients import create_topic, produce  # noqa: E402, F401
from tests.kit.engines import ENGINES, Engine, engine  # noqa: E402, F401
from tests.kit.wait import wait_until  # noqa: E402, F401


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


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(name, total)]).values():
        future.result(15)


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
