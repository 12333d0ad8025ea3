"""Broker failover under exactly-once processing on the 3-node Apache Kafka cluster.

A transactional copier (tests/integration/copier.py) and a Runner ``kafka_transactions``
worker (tests/integration/pattern_worker.py) run against topics with replication factor 3
and ``min.insync.replicas=2``, input produced with ``acks=all`` by an idempotent producer.
In the middle of the run one node is SIGKILLed: the leader of an output partition, or the
node of the transaction coordinator, or of the group coordinator. It is restarted
(``cluster.heal()``) a few seconds later and the run goes on to the end. The audit is
exact: every acknowledged input record is in the output once, nothing from an aborted
transaction is visible to read_committed, per-key (here per-partition) order is kept.

``make test`` runs the leader kill for each component; ONCEFLOW_STRESS=1 (``make stress``)
adds the coordinator kills; each case runs ONCEFLOW_FAILOVER_ROUNDS times (1, or 3 under
ONCEFLOW_STRESS).
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.faults.actions import FaultActions
from onceflow.faults.failover import committed_count, node_victims
from onceflow.faults.process import ProcessGroup
from onceflow.faults.progress import Counter
from onceflow.faults.results import Limits, RunResult
from onceflow.faults.run import FaultRun
from onceflow.faults.schedule import GROUP_COORDINATOR, LEADER, PROGRESS, TXN_COORDINATOR, Fault
from onceflow.kafka_cluster import KafkaCluster
from tests.integration.patterns_harness import ROOT, audit_topic, produce_events
from tests.kit.engines import PARTITIONS, Engine, cluster_engine

STRESS = os.environ.get("ONCEFLOW_STRESS") == "1"
ROUNDS = int(os.environ.get("ONCEFLOW_FAILOVER_ROUNDS", "3" if STRESS else "1"))
VICTIMS = (LEADER, TXN_COORDINATOR, GROUP_COORDINATOR) if STRESS else (LEADER,)
COPIER_RECORDS = 6000
RUNNER_EVENTS = 3000
DOWN_SECONDS = 4.0  # how long the killed node stays down before heal()


def committed(engine: Engine) -> int | None:
    return committed_count(engine.bootstrap, engine.group, engine.input, PARTITIONS)


def run_with_a_node_kill(
    cluster: KafkaCluster, engine: Engine, victim: str, total: int, command: list[str],
    log_path: Path,
) -> RunResult:  # fmt: skip
    """Run ``command`` supervised by the fault engine (restarted when it exits with an
    error or its group's committed offsets stop moving) to its clean exit; once a fifth of
    the input is committed, SIGKILL the victim's node and heal it DOWN_SECONDS later."""

    def start(_worker: int, _life: int, arming: dict[str, str]) -> ProcessGroup:
        return ProcessGroup(command, log_path, env={**os.environ, **arming}, cwd=ROOT)

    victims = node_victims(cluster, topic=engine.output, group=engine.group,
                           transactional_id=engine.txn_id)  # fmt: skip
    actions = FaultActions(cluster=cluster, node_down_s=DOWN_SECONDS, victim=victims)
    run = FaultRun(start, (Fault(PROGRESS, total // 5, victim),), log_path.parent, until="exit",
                   actions=actions, progress=Counter(lambda: committed(engine)),
                   limits=Limits(stall_s=45, timeout_s=240), supervised=True)  # fmt: skip
    result = run.run()
    (landing,) = result.landings
    assert landing.landed, landing.note
    assert landing.outputs < total, "the run ended before the kill: slow it down"
    return result


def summary(result: RunResult) -> str:
    return (f"{result.landings[0].note}; {result.restarts} error exits and {result.stalls} "
            "stalls restarted")  # fmt: skip


def read_committed_values(engine: Engine, topic: str, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": engine.bootstrap,
            "group.id": "failover-auditor",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: dict[int, list[bytes]] = defaultdict(list)
    deadline = time.monotonic() + 60
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
            for message in messages:
                values[message.partition()].append(message.value())
            if messages:
                quiet_since = time.monotonic()
            elif sum(map(len, values.values())) >= expected and time.monotonic() > quiet_since + 2:
                break
    finally:
        consumer.close()
    return values


@pytest.fixture
def failover_engine(apache_kafka_cluster, request) -> Iterator[Engine]:
    apache_kafka_cluster.heal()
    engine = cluster_engine(apache_kafka_cluster, request.node.name)
    engine.create_topics()
    yield engine
    apache_kafka_cluster.heal()


@pytest.mark.parametrize("round_", range(ROUNDS))
@pytest.mark.parametrize("victim", VICTIMS)
def test_transactional_copier_survives_a_node_kill(
    apache_kafka_cluster, failover_engine, tmp_path, victim, round_
):
    cluster, engine = apache_kafka_cluster, failover_engine
    producer = Producer({"bootstrap.servers": engine.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
    for number in range(COPIER_RECORDS):
        producer.produce(engine.input, key=str(number % 50).encode(), value=str(number).encode())
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    expected = read_committed_values(engine, engine.input, COPIER_RECORDS)
    assert sum(map(len, expected.values())) == COPIER_RECORDS

    command = [sys.executable, "-m", "tests.integration.copier", engine.bootstrap, engine.input,
               engine.output, engine.group, engine.txn_id, "classic", "0.15"]  # fmt: skip
    result = run_with_a_node_kill(cluster, engine, victim, COPIER_RECORDS, command,
                                  tmp_path / "copier.log")  # fmt: skip
    cluster.wait_in_sync(engine.output, timeout=60)

    output = read_committed_values(engine, engine.output, COPIER_RECORDS)
    for partition in range(PARTITIONS):
        got, want = output.get(partition, []), expected[partition]
        assert got == want, (
            f"partition {partition} after {summary(result)}: {len(got)} records out for "
            f"{len(want)} in, {len(got) - len(set(got))} duplicates"
        )
    print(f"copier {victim}: {COPIER_RECORDS} records, {summary(result)}")


@pytest.mark.parametrize("round_", range(ROUNDS))
@pytest.mark.parametrize("victim", VICTIMS)
def test_runner_kafka_transactions_survives_a_node_kill(
    apache_kafka_cluster, failover_engine, tmp_path, victim, round_
):
    cluster, engine = apache_kafka_cluster, failover_engine
    produce_events(engine, RUNNER_EVENTS)
    command = [sys.executable, "-m", "tests.integration.pattern_worker", "kafka_txn",
               engine.bootstrap, "-", *engine.worker_args(), "--idle-exit", "4",
               "--batch-size", "50", "--slow-ms", "3"]  # fmt: skip
    result = run_with_a_node_kill(cluster, engine, victim, RUNNER_EVENTS, command,
                                  tmp_path / "worker.log")  # fmt: skip
    cluster.wait_in_sync(engine.output, timeout=60)

    report, _ = audit_topic(engine)
    assert report.input.events == RUNNER_EVENTS
    assert report.ok, f"after {summary(result)}: {report.counts} e.g. {report.anomalies[:5]}"
    print(f"runner {victim}: {RUNNER_EVENTS} events, {summary(result)}")
