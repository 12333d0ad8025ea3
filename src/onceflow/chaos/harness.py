"""Run a list of chaos cells on one shared broker or cluster, side by side, and collect them.

Engines: ``onceflow`` (an embedded broker started for the run) or ``apache-kafka``: a
3-node Apache Kafka cluster from the launcher (``onceflow.kafka_cluster``), or one already
running (``cluster=``, e.g. the pytest fixture), or any cluster at ``bootstrap`` (without
control of its nodes: no failover cells). Cells that kill cluster nodes run one at a time
after the others, so no other cell sees their failover.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient

from onceflow.broker.process import BrokerProcess
from onceflow.chaos.cells import FAILOVER_FAULTS, CellResult, ChaosEnvironment
from onceflow.chaos.failover_cells import run_failover
from onceflow.chaos.matrix import ChaosMatrix, ordered
from onceflow.chaos.scenarios import APACHE_KAFKA, ONCEFLOW, Cell, Scenario
from onceflow.faults.databases import CellDatabases

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

CLUSTER_NODES = 3
COORDINATOR_PROBES = 20


@dataclass(frozen=True)
class Engine:
    """Where the cells run: the engine's name, and for Apache Kafka a cluster to use (or a
    bootstrap of one the harness does not control)."""

    name: str = ONCEFLOW
    cluster: KafkaCluster | None = None
    bootstrap: str | None = None
    topic_config: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in (ONCEFLOW, APACHE_KAFKA):
            raise ValueError(f"unknown engine {self.name!r}")
        if self.name == ONCEFLOW and (self.cluster is not None or self.bootstrap):
            raise ValueError("a cluster or bootstrap is for engine apache-kafka")

    @property
    def controls_nodes(self) -> bool:
        """Whether failover cells can kill nodes: the launcher's or a given cluster."""
        return self.name == APACHE_KAFKA and not self.bootstrap


def runnable(engine: Engine, cells: Sequence[tuple[Scenario, Cell]]) -> list[tuple[Scenario, Cell]]:
    """The cells that can run on ``engine`` (failover cells need control of the nodes)."""
    return [
        (scenario, cell)
        for scenario, cell in cells
        if engine.name in scenario.engines
        and (engine.controls_nodes or cell.fault not in FAILOVER_FAULTS)
    ]


@contextmanager
def environment(engine: Engine, work: Path, databases: CellDatabases) -> Iterator[ChaosEnvironment]:
    if engine.name == ONCEFLOW:
        broker = BrokerProcess(work / "broker", log_path=work / "broker.log").start()
        try:
            yield ChaosEnvironment(work, broker.bootstrap, databases)
        finally:
            broker.stop()
        return
    if engine.bootstrap:
        yield replicated(ChaosEnvironment(work, engine.bootstrap, databases), engine)
        return
    if engine.cluster is not None:
        engine.cluster.heal()
        yield with_failovers(replicated(ChaosEnvironment(work, engine.cluster.bootstrap,
                             databases, cluster=engine.cluster), engine))  # fmt: skip
        return
    from onceflow.kafka_cluster import KafkaCluster

    with KafkaCluster(CLUSTER_NODES, directory=work / "apache-kafka") as cluster:
        yield with_failovers(
            replicated(
                ChaosEnvironment(work, cluster.bootstrap, databases, cluster=cluster), engine
            )
        )


def with_failovers(env: ChaosEnvironment) -> ChaosEnvironment:
    """The failover cells' runner, for an environment whose cluster nodes it controls."""
    env.runners.update(dict.fromkeys(FAILOVER_FAULTS, run_failover))
    return env


def replicated(env: ChaosEnvironment, engine: Engine) -> ChaosEnvironment:
    """Cells' topics replicated like the seeds' durability settings: RF 3 (at most the
    number of brokers), ``min.insync.replicas=2`` (1 below 3 brokers)."""
    brokers = len(AdminClient({"bootstrap.servers": env.bootstrap}).list_topics(timeout=30).brokers)
    env.replication = min(3, brokers)
    env.topic_config = {"min.insync.replicas": "2" if brokers >= 3 else "1",
                        **engine.topic_config}  # fmt: skip
    coordinators_ready(env.bootstrap)
    return env


def coordinators_ready(bootstrap: str, timeout: float = 120.0) -> None:
    """Until the group and transaction coordinators answer: a new cluster creates
    ``__consumer_offsets`` and ``__transaction_state`` on first use and answers
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it loads them, which the seed
    articles' flows (one plain ``committed()`` call at start) would take for a failure."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "chaos-warm-up",
                         "log_level": 3})  # fmt: skip
    producer.init_transactions(timeout)
    for number in range(COORDINATOR_PROBES):  # groups spread over the partitions
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-warm-{number}",
                             "log_level": 3})  # fmt: skip
        try:
            while True:
                try:
                    consumer.committed([TopicPartition("__consumer_offsets", 0)], timeout=10)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            consumer.close()


def run_matrix(
    cells: Sequence[tuple[Scenario, Cell]],
    work: Path,
    *,
    database_url: str | None = None,
    jobs: int = 2,
    on_result: Callable[[CellResult], None] | None = None,
    engine: Engine | None = None,
) -> ChaosMatrix:
    """Run every cell (``jobs`` at a time, failover cells alone) and return the results in
    catalogue order."""
    engine = engine or Engine()
    work.mkdir(parents=True, exist_ok=True)
    databases = CellDatabases(work, database_url)
    alone = [(s, c) for s, c in cells if c.fault in FAILOVER_FAULTS]
    side_by_side = [(s, c) for s, c in cells if c.fault not in FAILOVER_FAULTS]
    results: list[CellResult] = []

    def collect(result: CellResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    try:
        with environment(engine, work, databases) as env:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(env.run, scenario, cell) for scenario, cell in side_by_side]
                for future in as_completed(futures):
                    collect(future.result())
            for scenario, cell in alone:
                collect(env.run(scenario, cell))
    finally:
        databases.drop_all()
    return ChaosMatrix(ordered(results), database=databases.dialect, engine=engine.name)
