"""The chaos matrix's failover cells: a node of the Apache Kafka cluster dies mid-flow.

The cell's topics have replication factor 3 and ``min.insync.replicas=2``; the input is
produced with ``acks=all`` by an idempotent producer; the worker (a Runner mode, its
producer idempotent or transactional) pauses at the cell's step. Then:

* ``leader_kill`` — SIGKILL the node leading partition 0 of the output topic (of the
  input topic for a row without one), release the worker, restart the node 4 s later;
* ``txn_coordinator_kill`` / ``group_coordinator_kill`` — the same with the node
  coordinating the worker's transactional id / consumer group;
* ``two_nodes_down`` — SIGKILL the two followers of output partition 0 (its leader stays:
  no ISR of 2, no controller quorum), release the worker, probe with an ``acks=all``
  producer that must get nothing acknowledged, then start one node again: the worker must
  finish on two nodes; the last node comes back after the audit's reads.

The worker is then supervised to its end (restarted when it exits with an error or stops
committing, see failover.py) and every output is audited like any other cell.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.kafka_cluster import KafkaCluster
from onceflow.verify.chaos.cells import (
    PARTITIONS,
    RUN_TIMEOUT_S,
    CellError,
    CellNames,
    ChaosEnvironment,
    Injector,
    audit_outputs,
    output_readers,
    paused_run,
    produce_events,
    release,
    worker_command,
)
from onceflow.verify.chaos.failover import Supervisor, committed_count, probe_acks, victim_node
from onceflow.verify.chaos.scenarios import Cell, Scenario
from onceflow.verify.report import AuditReport

DOWN_SECONDS = 4.0  # how long a killed node stays down
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
VICTIM_OF_FAULT = {
    "leader_kill": "leader",
    "txn_coordinator_kill": "transaction_coordinator",
    "group_coordinator_kill": "group_coordinator",
}
PROBES = 5


def healthy(cluster: KafkaCluster, *topics: str) -> None:
    """Every node up and every replica of ``topics`` (and of the internal topics that
    exist) in sync: a cell must not start on what the previous one left behind."""
    cluster.heal()
    existing = cluster.metadata().topics
    for topic in (*INTERNAL_TOPICS, *topics):
        if topic in existing:
            cluster.wait_in_sync(topic, timeout=90)


def run_failover(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    cluster = env.cluster
    if cluster is None:
        raise CellError("a failover cell needs a cluster it controls (--engine apache-kafka)")
    mode, _, step = cell.step.partition(":")
    healthy(cluster)
    database_url = env.databases.create(names.prefix)
    env.create_topics(names.input, names.output)
    produce_events(env.bootstrap, names.input)
    notes: list[str] = []
    command = worker_command(env.bootstrap, "runner", mode, names, database_url)
    log_path = cell_dir / "worker.log"

    def progress() -> int | None:
        return committed_count(env.bootstrap, names.group, names.input, PARTITIONS)

    def supervise(process: subprocess.Popen) -> None:
        supervisor = Supervisor(command, log_path, progress, process=process, stall_seconds=30)
        try:
            supervisor.finish(RUN_TIMEOUT_S * 2)
        except AssertionError as error:
            raise CellError(str(error)) from None
        finally:
            supervisor.kill()
        if supervisor.crashes or supervisor.stalls:
            notes.append(f"worker {supervisor.summary()}")

    outputs = tuple(cell.expected)
    watched = names.output if "topic" in outputs else names.input
    with injected(cell.fault, env, cluster, names, watched, notes) as inject:
        paused_run(command, f"{step}:{cell.occurrence}", log_path, inject, supervise)
        readers = output_readers(env.bootstrap, outputs, names, database_url)
        report = audit_outputs(env.bootstrap, names.input, readers)
    healthy(cluster, names.input, names.output)
    return report, "; ".join(notes)


@contextmanager
def injected(
    fault: str,
    env: ChaosEnvironment,
    cluster: KafkaCluster,
    names: CellNames,
    watched: str,
    notes: list[str],
) -> Iterator[Injector]:
    """The injector for ``fault``; every node is running again when the block ends."""
    try:
        if fault == "two_nodes_down":
            yield lambda process: two_nodes_down(env, cluster, names, watched, notes, process)
        else:
            yield lambda process: kill_one(fault, cluster, names, watched, notes, process)
    finally:
        cluster.heal()


def kill_one(
    fault: str,
    cluster: KafkaCluster,
    names: CellNames,
    watched: str,
    notes: list[str],
    process: subprocess.Popen,
) -> None:
    victim = VICTIM_OF_FAULT[fault]
    node = victim_node(cluster, victim, topic=watched, group=names.group,
                       transactional_id=names.transactional_id)  # fmt: skip
    cluster.kill(node)
    release(process)
    time.sleep(DOWN_SECONDS)
    started = time.monotonic()
    cluster.heal()
    what = f"{watched} partition 0" if victim == "leader" else names.group
    if victim == "transaction_coordinator":
        what = names.transactional_id
    notes.append(
        f"node {node} ({victim.replace('_', ' ')} of {what}) SIGKILLed, "
        f"back after {DOWN_SECONDS + time.monotonic() - started:.0f} s"
    )


def two_nodes_down(
    env: ChaosEnvironment,
    cluster: KafkaCluster,
    names: CellNames,
    watched: str,
    notes: list[str],
    process: subprocess.Popen,
) -> None:
    leader = cluster.leader_of(watched, 0)
    first, second = [n for n in sorted(cluster.nodes) if n != leader]
    probe_topic = f"{names.prefix}.probe"
    admin = AdminClient({"bootstrap.servers": env.bootstrap})
    new = NewTopic(probe_topic, 1, -1, replica_assignment=[[leader, first, second]],
                   config=env.topic_config)  # fmt: skip
    admin.create_topics([new])[probe_topic].result(30)
    cluster.wait_for_topic(probe_topic)
    cluster.kill(first)
    deadline = time.monotonic() + 30
    while cluster.isr_of(watched, 0, seen_by=leader) != sorted([leader, second]):
        if time.monotonic() > deadline:
            raise CellError(f"the ISR of {watched} did not shrink after node {first} died")
        time.sleep(0.1)
    cluster.kill(second)
    release(process)
    probe = probe_acks(env.bootstrap, probe_topic, [str(n).encode() for n in range(PROBES)])
    if not probe.refused_only:
        raise CellError(f"with nodes {first} and {second} down: {probe.summary()}")
    cluster.start_node(second)
    notes.append(
        f"nodes {first} and {second} SIGKILLed (leader {leader} alone); acks=all probe while "
        f"down: {probe.summary()}; node {second} back, the worker finished on 2 nodes"
    )
