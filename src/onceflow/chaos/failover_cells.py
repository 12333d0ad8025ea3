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

The worker is then supervised to its end by the fault engine (restarted when it exits
with an error or stops committing) and every output is audited like any other cell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.chaos.cells import (
    PARTITIONS,
    RUN_TIMEOUT_S,
    CellError,
    CellNames,
    ChaosEnvironment,
    audit_outputs,
    output_readers,
    produce_events,
    run_through,
    worker_command,
)
from onceflow.chaos.scenarios import Cell, Scenario
from onceflow.faults.actions import FaultActions
from onceflow.faults.failover import committed_count, healthy, node_victims, probe_acks
from onceflow.faults.progress import Counter
from onceflow.faults.schedule import GROUP_COORDINATOR, LEADER, TXN_COORDINATOR, Fault
from onceflow.kafka_cluster import KafkaCluster
from onceflow.verify.report import AuditReport

DOWN_SECONDS = 4.0  # how long a killed node stays down
TWO_NODES_DOWN = "two-nodes-down"
ACTION_OF_FAULT = {
    "leader_kill": LEADER,
    "txn_coordinator_kill": TXN_COORDINATOR,
    "group_coordinator_kill": GROUP_COORDINATOR,
    "two_nodes_down": TWO_NODES_DOWN,
}
PROBES = 5


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
    outputs = tuple(cell.expected)
    watched = names.output if "topic" in outputs else names.input

    victim = node_victims(cluster, topic=watched, group=names.group,
                          transactional_id=names.transactional_id)  # fmt: skip
    actions = FaultActions(cluster=cluster, victim=victim, node_down_s=DOWN_SECONDS)
    actions.extra[TWO_NODES_DOWN] = lambda release: two_nodes_down(
        env, cluster, names, watched, release)  # fmt: skip
    progress = Counter(lambda: committed_count(env.bootstrap, names.group, names.input,
                                               PARTITIONS))  # fmt: skip
    fault = Fault(step, cell.occurrence, ACTION_OF_FAULT[cell.fault])
    try:
        result = run_through(
            command,
            cell_dir / "worker.log",
            (fault,),
            actions,
            timeout_s=2 * RUN_TIMEOUT_S,
            supervised=progress,
            stall_s=30,
        )
        notes.append(result.landings[0].note)
        if result.restarts or result.stalls:
            notes.append(f"worker restarted after {result.restarts} error exits, "
                         f"{result.stalls} stalls killed")  # fmt: skip
        readers = output_readers(env.bootstrap, outputs, names, database_url)
        report = audit_outputs(env.bootstrap, names.input, readers)
    finally:
        cluster.heal()
    healthy(cluster, names.input, names.output)
    return report, "; ".join(notes)


def two_nodes_down(
    env: ChaosEnvironment,
    cluster: KafkaCluster,
    names: CellNames,
    watched: str,
    release: Callable[[], None],
) -> str:
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
    release()
    probe = probe_acks(env.bootstrap, probe_topic, [str(n).encode() for n in range(PROBES)])
    if not probe.refused_only:
        raise CellError(f"with nodes {first} and {second} down: {probe.summary()}")
    cluster.start_node(second)
    return (
        f"nodes {first} and {second} SIGKILLed (leader {leader} alone); acks=all probe while "
        f"down: {probe.summary()}; node {second} back, the worker finished on 2 nodes"
    )
