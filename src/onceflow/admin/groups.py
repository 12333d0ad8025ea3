"""Consumer groups: list, describe, committed offsets and lag, delete.

Through confluent-kafka's AdminClient, so it works against onceflow's broker and any
Kafka cluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import NotFound

INACTIVE_STATES = ("Empty", "Dead")


GROUP_TYPES = ("classic", "consumer")  # Kafka's group protocols (KIP-848: consumer)
SIMPLE = "simple"  # a classic group that only committed offsets: no member ever joined


@dataclass(frozen=True, slots=True)
class GroupListing:
    group: str
    type: str  # "classic", "consumer" (KIP-848) or "simple" (a classic group, offsets only)
    state: str
    members: int
    assignor: str
    internal: bool  # made by onceflow's own tools (the topics lock), not by an application


# The consumer group ``onceflow topics migrate`` holds as its cluster-side lock
# (onceflow.topics.lock, which takes the name from here: admin is below topics).
TOPICS_LOCK_GROUP = "onceflow-topics-lock"


def is_internal(group: str) -> bool:
    """Whether onceflow's own tools made the group: the lock topics migrate takes."""
    return group == TOPICS_LOCK_GROUP


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    partitions: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group: str
    state: str
    assignor: str
    coordinator: str | None
    members: list[Member] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class OffsetRow:
    topic: str
    partition: int
    committed: int
    log_end: int | None
    metadata: str

    @property
    def lag(self) -> int | None:
        if self.log_end is None or self.committed < 0:
            return None
        return max(self.log_end - self.committed, 0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lag": self.lag}


def state_name(state: object) -> str:
    """librdkafka's ConsumerGroupState as Kafka spells it (PreparingRebalance, ...)."""
    name = getattr(state, "name", str(state))
    return {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.title().replace("_", ""))


def group_type(listing: object) -> str:
    """The protocol of a ConsumerGroupListing: classic, consumer, or unknown (old brokers)."""
    kind = getattr(getattr(listing, "type", None), "name", "UNKNOWN")
    return kind.lower()


def list_groups(
    session: ClusterSession, types: tuple[str, ...] = (), internal: bool = False
) -> list[GroupListing]:
    """Every group the principal may describe: only the ``types`` given, if any (classic
    includes simple groups, as Kafka lists them), and onceflow's internal groups only with
    ``internal``. NotAuthorized when the principal may see none."""
    listing = session.result(
        session.admin.list_consumer_groups(request_timeout=session.timeout), "list groups"
    )
    if not listing.valid:
        session.require_visibility("list groups")
    ids = sorted(group.group_id for group in listing.valid)
    descriptions = {}
    if ids:
        futures = session.admin.describe_consumer_groups(ids, request_timeout=session.timeout)
        descriptions = session.results(futures, "describe groups")
    rows = []
    for group in sorted(listing.valid, key=lambda g: g.group_id):
        if types and group_type(group) not in types:
            continue
        if is_internal(group.group_id) and not internal:
            continue
        description = descriptions.get(group.group_id)
        rows.append(
            GroupListing(
                group=group.group_id,
                type=SIMPLE if group.is_simple_consumer_group else group_type(group),
                state=state_name(group.state),
                members=len(description.members) if description else 0,
                assignor=(description.partition_assignor if description else "") or "",
                internal=is_internal(group.group_id),
            )
        )
    return rows


def group_state(session: ClusterSession, group: str) -> str:
    """The group's state; "Dead" for a group the coordinator does not know."""
    futures = session.admin.describe_consumer_groups([group], request_timeout=session.timeout)
    return state_name(session.result(futures[group], f"describe group {group}").state)


def describe_group(session: ClusterSession, group: str) -> GroupDescription:
    """State, assignor, coordinator and members; NotFound for an unknown group."""
    futures = session.admin.describe_consumer_groups([group], request_timeout=session.timeout)
    description = session.result(futures[group], f"describe group {group}")
    state = state_name(description.state)
    if state == "Dead" and not description.members:
        raise NotFound(f"consumer group {group!r} does not exist")
    coordinator = description.coordinator
    members = []
    for member in description.members:
        tps = member.assignment.topic_partitions if member.assignment else []
        members.append(
            Member(
                member_id=member.member_id,
                client_id=member.client_id,
                host=member.host,
                instance_id=member.group_instance_id,
                partitions=sorted((tp.topic, tp.partition) for tp in tps or ()),
            )
        )
    return GroupDescription(
        group=group,
        state=state,
        assignor=description.partition_assignor or "",
        coordinator=f"{coordinator.host}:{coordinator.port} (node {coordinator.id})"
        if coordinator
        else None,
        members=members,
    )


def committed(session: ClusterSession, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(topic, partition) -> (committed offset, metadata) of every partition the group committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = [ConsumerGroupTopicPartitions(group)]
    futures = session.admin.list_consumer_group_offsets(request, request_timeout=session.timeout)
    result = session.result(futures[group], f"offsets of group {group}")
    return {
        (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
        for tp in result.topic_partitions or ()
        if tp.error is None
    }


def log_offsets(
    session: ClusterSession,
    partitions: list[tuple[str, int]],
    spec: Any = None,
    read_committed: bool = False,
) -> dict[tuple[str, int], int]:
    """Offsets of ``partitions`` for an OffsetSpec (default: the log end; with
    ``read_committed``, the last stable offset); deleted ones left out."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not partitions:
        return {}
    spec = spec if spec is not None else OffsetSpec.latest()
    wanted = {TopicPartition(t, p): spec for t, p in partitions}
    found = {}
    isolation = (IsolationLevel.READ_COMMITTED if read_committed
                 else IsolationLevel.READ_UNCOMMITTED)  # fmt: skip
    futures = session.admin.list_offsets(
        wanted, isolation_level=isolation, request_timeout=session.timeout
    )
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = session.result(future, "list offsets").offset
        except NotFound:
            continue  # a deleted topic: no offsets
    return found


def committed_offsets(session: ClusterSession, group: str) -> list[OffsetRow]:
    """Committed offset, log end and lag per partition; NotFound for an unknown group."""
    if group_state(session, group) == "Dead":
        raise NotFound(f"consumer group {group!r} does not exist")
    offsets = committed(session, group)
    log_ends = log_offsets(session, list(offsets))
    return [
        OffsetRow(topic, partition, offset, log_ends.get((topic, partition)), metadata)
        for (topic, partition), (offset, metadata) in sorted(offsets.items())
    ]


def delete_groups(session: ClusterSession, groups: list[str]) -> None:
    """Delete groups and their committed offsets (Kafka refuses a group with members)."""
    futures = session.admin.delete_consumer_groups(groups, request_timeout=session.timeout)
    for group, future in futures.items():
        session.result(future, f"delete group {group}")
