"""Topics of any cluster: list them, describe partitions, replicas and configs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import NotFound


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    partitions: int
    replication_factor: int
    internal: bool


# A partition's Metadata error, in words (Kafka's code name first).
PARTITION_ERRORS = {
    "KAFKA_STORAGE_ERROR": "offline: KAFKA_STORAGE_ERROR: the broker cannot read this "
    "partition's log (damaged or unreadable on disk) and serves nothing from it; the "
    "broker's log names the file and byte, 'onceflow log check' the damage",
    "CORRUPT_MESSAGE": "offline: CORRUPT_MESSAGE: the broker found this partition's "
    "stored data damaged and serves nothing from it; the broker's log names the file and "
    "byte, 'onceflow log check' the damage",
    "LEADER_NOT_AVAILABLE": "offline: LEADER_NOT_AVAILABLE: no replica can lead it",
}


def partition_problem(error: Any) -> str | None:
    """A Metadata partition error (librdkafka's KafkaError or None) in words."""
    if error is None:
        return None
    name = error.name()
    return PARTITION_ERRORS.get(name, f"{name}: {error.str()}")


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    problem: str | None = None  # the partition's error in words (offline, and why)


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str] = field(default_factory=dict)  # set on the topic, not defaults

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_topics(session: ClusterSession, internal: bool = False) -> list[TopicListing]:
    """Every topic the principal may describe; NotAuthorized when it may see nothing."""
    rows = []
    for name, topic in session.list_topics().topics.items():
        is_internal = name.startswith("__")
        if topic.error is not None or (is_internal and not internal):
            continue
        partitions = topic.partitions
        replicas = len(partitions[min(partitions)].replicas) if partitions else 0
        rows.append(TopicListing(name, len(partitions), replicas, is_internal))
    if not rows:
        session.require_visibility("list topics")
    return sorted(rows, key=lambda row: row.name)


def describe_topics(session: ClusterSession, names: list[str]) -> list[TopicDescription]:
    """Partitions and topic-level configs of each topic; NotFound for an unknown one,
    NotAuthorized for one the principal may not describe."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    session.require_topics(names)
    metadata = session.list_topics()
    for name in names:
        described = metadata.topics.get(name)
        if described is None or described.error is not None:
            raise NotFound(f"topic {name!r} does not exist")
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = session.admin.describe_configs(resources, request_timeout=session.timeout)
    configs = {
        resource.name: {
            key: entry.value or ""
            for key, entry in session.result(future, f"configs of {resource.name}").items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
        for resource, future in futures.items()
    }
    descriptions = []
    for name in names:
        topic = metadata.topics[name]
        descriptions.append(
            TopicDescription(
                name=name,
                partitions=[
                    PartitionInfo(
                        p.id,
                        p.leader,
                        list(p.replicas),
                        list(p.isrs),
                        partition_problem(p.error),
                    )
                    for p in sorted(topic.partitions.values(), key=lambda p: p.id)
                ],
                configs=dict(sorted(configs.get(name, {}).items())),
            )
        )
    return descriptions
