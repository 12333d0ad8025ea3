"""Ask one node (not "the cluster") for metadata, over onceflow's raw protocol client.

librdkafka sends a metadata request to whichever broker it likes once it knows several,
so "does node 2 serve Metadata?" needs a connection to node 2 alone. Also which partition
of a coordinator's topic holds a key, the way Kafka hashes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest
from kio.schema.describe_quorum.v1.request import PartitionData as QuorumPartition
from kio.schema.describe_quorum.v1.request import TopicData as QuorumTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from onceflow.protocol.client import WireClient


@dataclass(frozen=True, slots=True)
class NodeView:
    """What one node answered: the broker ids it lists and, per topic asked about, the
    leader and the ISR of each partition (absent: the node does not know the topic)."""

    brokers: frozenset[int]
    leaders: dict[str, dict[int, int]]
    isrs: dict[str, dict[int, list[int]]]


def node_metadata(address: str, topics: tuple[str, ...] = (), timeout: float = 2.0) -> NodeView:
    """Metadata from the node at ``address``; OSError if it cannot answer."""
    client = WireClient(address, timeout)
    try:
        response = client.request(
            MetadataRequest,
            topics=tuple(MetadataRequestTopic(topic_id=None, name=name) for name in topics),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        client.close()
    known = [topic for topic in response.topics if topic.error_code == 0]
    leaders = {
        str(topic.name): {int(p.partition_index): int(p.leader_id) for p in topic.partitions}
        for topic in known
    }
    isrs = {
        str(topic.name): {
            int(p.partition_index): sorted(int(n) for n in p.isr_nodes) for p in topic.partitions
        }
        for topic in known
    }
    return NodeView(frozenset(int(b.node_id) for b in response.brokers), leaders, isrs)


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The KRaft controller quorum as its leader sees it: the leader (-1: none), the
    metadata log's high watermark and each voter's log end offset (-1: unknown)."""

    leader: int
    high_watermark: int
    voters: dict[int, int]


def quorum(address: str, timeout: float = 2.0) -> QuorumView:
    """DescribeQuorum of ``__cluster_metadata`` through the node at ``address`` (a broker
    forwards it to the active controller); OSError if it cannot answer."""
    client = WireClient(address, timeout)
    try:
        response = client.request(
            DescribeQuorumRequest,
            topics=(
                QuorumTopic(
                    topic_name="__cluster_metadata",
                    partitions=(QuorumPartition(partition_index=0),),
                ),
            ),
        )
    finally:
        client.close()
    if response.error_code != 0 or not response.topics:
        return QuorumView(-1, -1, {})
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        return QuorumView(-1, -1, {})
    return QuorumView(
        int(partition.leader_id),
        int(partition.high_watermark),
        {int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters},
    )


def wait_for_every_node(
    nodes: dict[int, str], topic: str, done: Callable[[dict[str, dict[int, int]]], bool],
    timeout: float,
) -> list[int]:  # fmt: skip
    """Ask each node (id -> address) about ``topic`` until ``done`` holds for what it
    knows of it (its leaders by topic); the ids still not done after ``timeout``."""
    deadline = time.monotonic() + timeout
    waiting = dict(nodes)
    while waiting:
        for node_id, address in list(waiting.items()):
            try:
                leaders = node_metadata(address, (topic,)).leaders
            except OSError:
                continue
            if done(leaders):
                del waiting[node_id]
        if waiting and time.monotonic() > deadline:
            break
        if waiting:
            time.sleep(0.1)
    return sorted(waiting)


def coordinator_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (Java's String.hashCode): the
    partition of ``__consumer_offsets`` / ``__transaction_state`` a group or a
    transactional id lives in."""
    value = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    absolute = 0 if value == -(1 << 31) else abs(value)
    return absolute % partitions
