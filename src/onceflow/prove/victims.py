"""Which Apache Kafka node a node fault kills: the leader of an output partition (of the
input's when the pipeline writes no topic), the coordinator of the group that consumes
the input, or the coordinator of a transaction the pipeline has open."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from onceflow.faults.actions import ActionUnavailable, Victim
from onceflow.faults.failover import leader_victim
from onceflow.faults.group_watch import consuming_groups
from onceflow.faults.probe import groups_committed_on
from onceflow.faults.schedule import GROUP_COORDINATOR, LEADER, TXN_COORDINATOR
from onceflow.prove.brokers import TrialCluster
from onceflow.prove.target import Target

if TYPE_CHECKING:
    from onceflow.admin.connect import ClusterSession
    from onceflow.admin.transactions import TransactionListing

ONGOING = "Ongoing"
ONGOING_WAIT_S = 10.0  # a pipeline under load opens its next transaction within this
ONGOING_POLL_S = 0.02


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
            session, listing = _pipeline_transaction(cluster.bootstrap, target.output_topics)
            return Victim(listing.coordinator, f"transactional id {listing.transactional_id}",
                          moment=lambda: _opened(session, listing.transactional_id))  # fmt: skip
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


def _pipeline_transaction(
    bootstrap: str, outputs: tuple[str, ...]
) -> tuple[ClusterSession, TransactionListing]:
    """A transactional id of the pipeline's (one whose producer wrote to its output topics:
    a shared cluster knows other programs' ids too), one with a transaction open if there
    is, as its coordinator lists it."""
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
    ongoing = [t for t in own if t.state == ONGOING]
    return session, (ongoing or own)[0]


def _opened(session: ClusterSession, transactional_id: str) -> str:
    """Once ``transactional_id`` has a transaction open (the pipeline at work on the input
    just let in), or after ONGOING_WAIT_S: a coordinator killed then fails the
    transaction's next steps. Killed between transactions or as a commit completes, it
    failed none of a pipeline's steps in 3 of 8 faults (the commit completes on the new
    coordinator, and no more input is readable until the cluster has moved on)."""
    from onceflow.admin.errors import AdminError
    from onceflow.admin.transactions import list_transactions

    deadline = time.monotonic() + ONGOING_WAIT_S
    while time.monotonic() < deadline:
        try:
            listed = list_transactions(session, states=(ONGOING,))
        except (AdminError, OSError):  # a node still starting after the last fault
            listed = []
        if any(t.transactional_id == transactional_id for t in listed):
            return "its transaction open"
        time.sleep(ONGOING_POLL_S)
    return f"no transaction open within {ONGOING_WAIT_S:.0f} s"
