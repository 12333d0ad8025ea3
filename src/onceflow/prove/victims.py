"""Which Apache Kafka node a node fault kills: the leader of an output partition (of the
input's when the pipeline writes no topic), the coordinator of the group that consumes
the input, or the coordinator of a transaction the pipeline has open."""

from __future__ import annotations

from collections.abc import Callable

from onceflow.faults.actions import ActionUnavailable, Victim
from onceflow.faults.failover import leader_victim
from onceflow.faults.group_watch import consuming_groups
from onceflow.faults.probe import groups_committed_on
from onceflow.faults.schedule import GROUP_COORDINATOR, LEADER, TXN_COORDINATOR
from onceflow.prove.brokers import TrialCluster
from onceflow.prove.target import Target


def victim_finder(cluster: TrialCluster, target: Target) -> Callable[[str], Victim] | None:
    kafka = cluster.kafka
    if kafka is None:
        return None

    def victim(action: str) -> Victim:
        if action == LEADER:
            return leader_victim(kafka, (target.output_topics or (target.input_topic,))[0])
        if action == GROUP_COORDINATOR:
            group = _consuming_group(cluster.bootstrap, target.input_topic)
            return Victim(kafka.coordinator_of(group=group), f"group {group}")
        if action == TXN_COORDINATOR:
            transactional_id = _open_transaction(cluster.bootstrap, target.output_topics)
            node = kafka.coordinator_of(transactional_id=transactional_id)
            return Victim(node, f"transactional id {transactional_id}")
        raise ActionUnavailable(f"no victim for {action}")

    return victim


def _consuming_group(bootstrap: str, topic: str) -> str:
    """The group whose members read ``topic``, or (a pipeline that assigns) that has
    committed offsets on it."""
    for group_id, topics in consuming_groups(bootstrap).items():
        if topic in topics:
            return group_id
    committing = groups_committed_on(bootstrap, [topic])
    if committing:
        return committing[0]
    raise ActionUnavailable(f"no consumer group reads {topic} or has committed offsets on "
                            "it: the pipeline keeps its offsets elsewhere")  # fmt: skip


def _open_transaction(bootstrap: str, outputs: tuple[str, ...]) -> str:
    """A transactional id of the pipeline's (one whose producer wrote to its output topics:
    a shared cluster knows other programs' ids too), one with a transaction open if there
    is."""
    from onceflow.admin.connect import ClusterSession
    from onceflow.admin.errors import AdminError
    from onceflow.admin.transactions import describe_producers, list_transactions

    session = ClusterSession({"bootstrap.servers": bootstrap, "log_level": 0})
    listed = list_transactions(session)
    if not listed:
        raise ActionUnavailable("no transactional id is known: the pipeline uses no Kafka "
                                "transactions")  # fmt: skip
    writers = set()
    for topic in outputs:
        try:
            writers |= {state.producer_id for state in describe_producers(session, topic)}
        except (AdminError, OSError):  # not there yet, or its leader moving: any id then
            continue
    own = [t for t in listed if t.producer_id in writers] or listed
    ongoing = [t for t in own if t.state == "Ongoing"]
    return (ongoing or own)[0].transactional_id
