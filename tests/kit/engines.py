"""The engines the cross-engine tests run on: onceflow's broker and an Apache Kafka cluster.

A test asks for the ``engine`` fixture and gets an :class:`Engine`: a bootstrap and the
names of its topics, group and transactional id. ``onceflow`` is a fresh embedded broker
per test (in the test process) with the plain names ("input", "output", "dlq");
``apache-kafka`` is the session's shared 3-node cluster, so every name is unique to the
test and the topics have replication factor 3 and ``min.insync.replicas=2``. Choose
engines with ``@pytest.mark.parametrize("engine", ENGINES, indirect=True)`` (or
``[ONCEFLOW, on_apache_kafka()]``); without it a test runs on onceflow only. A conftest
that imports ``engine`` offers the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from onceflow.testing import APACHE_KAFKA_GROUP, unique_name
from tests.kit.clients import create_topic

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

ONCEFLOW = "onceflow"
APACHE_KAFKA = "apache-kafka"
PARTITIONS = 3
REPLICATED = {"min.insync.replicas": "2"}


@dataclass(frozen=True)
class Engine:
    name: str
    bootstrap: str
    input: str = "input"
    output: str = "output"
    dlq: str = "dlq"
    group: str = "workers"
    txn_id: str = "worker-txn"
    cluster: KafkaCluster | None = None

    @property
    def replication_factor(self) -> int:
        return 1 if self.cluster is None else 3

    def create_topics(self, partitions: int = PARTITIONS) -> None:
        """The input, output and dead-letter topics (replicated 3 times on the cluster)."""
        config = {} if self.cluster is None else REPLICATED
        for name in (self.input, self.output, self.dlq):
            create_topic(self.bootstrap, name, partitions, self.replication_factor, **config)

    def worker_args(self) -> list[str]:
        """Options of tests/integration/pattern_worker.py naming this engine's topics."""
        return ["--input", self.input, "--output", self.output, "--dlq", self.dlq,
                "--group", self.group, "--txn-id", self.txn_id]  # fmt: skip


def on_apache_kafka(*values: Any, id: str | None = None) -> Any:
    """A parametrize value for the cluster engine: it runs on the cluster's xdist worker."""
    return pytest.param(
        *(values or (APACHE_KAFKA,)),
        marks=pytest.mark.xdist_group(APACHE_KAFKA_GROUP),
        id=id or (None if values else APACHE_KAFKA),
    )


# Both engines, each test once on each (the cluster's tests share one xdist worker).
ENGINES = [pytest.param(ONCEFLOW, id=ONCEFLOW), on_apache_kafka()]


def cluster_engine(cluster: KafkaCluster, hint: str) -> Engine:
    """The cluster as an engine, every name unique (``hint`` is e.g. the test's name)."""
    prefix = unique_name(hint)
    return Engine(
        APACHE_KAFKA,
        cluster.bootstrap,
        input=f"{prefix}-input",
        output=f"{prefix}-output",
        dlq=f"{prefix}-dlq",
        group=f"{prefix}-workers",
        txn_id=f"{prefix}-txn",
        cluster=cluster,
    )


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    name = getattr(request, "param", ONCEFLOW)
    if name == ONCEFLOW:
        yield Engine(ONCEFLOW, request.getfixturevalue("kafka_broker").bootstrap)
        return
    assert name == APACHE_KAFKA, name
    cluster = request.getfixturevalue("apache_kafka_cluster")
    cluster.heal()
    yield cluster_engine(cluster, request.node.name)
    cluster.heal()
