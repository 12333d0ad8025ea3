"""Ask one node (not "the cluster") for metadata, over onceflow's raw protocol client.

librdkafka sends a metadata request to whichever broker it likes once it knows several,
so "does node 2 serve Metadata?" needs a connection to node 2 alone.
"""

from __future__ import annotations

from dataclasses import dataclass

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
