"""The cluster page and a topic's page: brokers, topics, and each partition's log start,
last stable offset and high watermark, the gap between the last two drawn (the records a
``read_committed`` consumer cannot see yet)."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.admin.connect import ClusterSession
from onceflow.admin.groups import log_offsets
from onceflow.admin.topics import TopicListing, describe_topics, list_topics


@dataclass(frozen=True, slots=True)
class Broker:
    node: int
    address: str
    controller: bool


@dataclass(frozen=True, slots=True)
class ClusterOverview:
    cluster_id: str | None
    brokers: list[Broker]
    topics: list[TopicListing]  # this page of them
    topic_count: int
    partition_count: int


def overview(session: ClusterSession, page: list[int], search: str = "") -> ClusterOverview:
    """The brokers and the topics whose name contains ``search``, ``page`` = [first, count]."""
    described = session.result(
        session.admin.describe_cluster(request_timeout=session.timeout), "describe cluster"
    )
    controller = described.controller.id if described.controller is not None else None
    brokers = sorted(
        (
            Broker(node.id, f"{node.host}:{node.port}", node.id == controller)
            for node in described.nodes
        ),
        key=lambda b: b.node,
    )
    topics = [t for t in list_topics(session, internal=True) if search in t.name]
    first, count = page
    return ClusterOverview(
        described.cluster_id,
        brokers,
        topics[first : first + count],
        len(topics),
        sum(t.partitions for t in topics),
    )


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    problem: str | None
    log_start: int | None
    stable: int | None  # the LSO: read_committed consumers read up to here
    high_watermark: int | None

    @property
    def records(self) -> int | None:
        if self.log_start is None or self.high_watermark is None:
            return None
        return self.high_watermark - self.log_start

    @property
    def unstable(self) -> int:
        """Records past the LSO: in transactions still open."""
        if self.stable is None or self.high_watermark is None:
            return 0
        return self.high_watermark - self.stable


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    partitions: list[PartitionView]
    configs: dict[str, str]


def topic(session: ClusterSession, name: str) -> TopicView:
    """NotFound for an unknown topic, NotAuthorized for one the principal may not see."""
    from confluent_kafka.admin import OffsetSpec

    description = describe_topics(session, [name])[0]
    keys = [(name, p.partition) for p in description.partitions]
    starts = log_offsets(session, keys, OffsetSpec.earliest())
    ends = log_offsets(session, keys)
    stable = log_offsets(session, keys, read_committed=True)
    return TopicView(
        name,
        [
            PartitionView(
                p.partition,
                p.leader,
                p.replicas,
                p.isr,
                p.problem,
                starts.get((name, p.partition)),
                stable.get((name, p.partition)),
                ends.get((name, p.partition)),
            )
            for p in description.partitions
        ],
        description.configs,
    )
