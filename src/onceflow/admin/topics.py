"""Topics of any cluster: list them, describe partitions, replicas and configs; create,
delete and add partitions to one topic at a time (kafka-topics' operations)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import AdminError, AlreadyExists, NotFound, Refused


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


# One topic at a time, as kafka-topics --create, --alter --partitions and --delete do.


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    partitions: int
    replication_factor: int
    existed: bool = False  # it was there already (--if-not-exists): left as it is


def _existing(session: ClusterSession, names: list[str]) -> set[str]:
    """Those of ``names`` that exist, by Metadata of every topic (never auto-creating)."""
    topics = session.list_topics().topics
    return {name for name in names if name in topics and topics[name].error is None}


def _layout(session: ClusterSession, name: str) -> tuple[int, int]:
    """(partitions, replication factor) of a topic just created, once Metadata shows it."""
    deadline = time.monotonic() + session.timeout
    while True:
        topic = session.list_topics().topics.get(name)
        if topic is not None and topic.error is None and topic.partitions:
            partitions = topic.partitions
            return len(partitions), len(partitions[min(partitions)].replicas)
        if time.monotonic() > deadline:
            raise AdminError(f"topic {name!r} was created but Metadata does not show it")
        time.sleep(0.1)


def create_topic(
    session: ClusterSession,
    name: str,
    partitions: int | None = None,
    replication_factor: int | None = None,
    configs: dict[str, str] | None = None,
    if_not_exists: bool = False,
) -> CreatedTopic:
    """Create one topic (the broker's defaults for what is None). Refused if it exists,
    unless ``if_not_exists``; AdminError for what the cluster rejects (INVALID_CONFIG...)."""
    from confluent_kafka.admin import NewTopic

    new = NewTopic(
        name,
        num_partitions=partitions or -1,
        replication_factor=replication_factor or -1,
        config=dict(configs or {}),
    )
    future = session.admin.create_topics([new], request_timeout=session.timeout)[name]
    try:
        session.result(future, f"create topic {name}")
    except AlreadyExists:
        if not if_not_exists:
            raise Refused(f"topic {name!r} already exists") from None
        return CreatedTopic(name, *_layout(session, name), existed=True)
    return CreatedTopic(name, *_layout(session, name))


def delete_topics(session: ClusterSession, names: list[str], if_exists: bool = False) -> list[str]:
    """Delete topics and their data; return those deleted once Metadata no longer shows
    them (Kafka deletes asynchronously). NotFound for an unknown one unless ``if_exists``."""
    existing = _existing(session, names)
    if not if_exists:
        session.require_topics([name for name in names if name not in existing])
    doomed = [name for name in names if name in existing]
    if not doomed:
        return []
    futures = session.admin.delete_topics(doomed, request_timeout=session.timeout)
    for name, future in futures.items():
        session.result(future, f"delete topic {name}")
    deadline = time.monotonic() + session.timeout
    while _existing(session, doomed) and time.monotonic() < deadline:
        time.sleep(0.1)
    return doomed


def add_partitions(session: ClusterSession, name: str, total: int, if_exists: bool = False) -> bool:
    """Give a topic ``total`` partitions (Kafka only adds); False when it does not exist
    and ``if_exists``, NotFound when it does not exist otherwise."""
    from confluent_kafka.admin import NewPartitions

    if name not in _existing(session, [name]):
        if if_exists:
            return False
        session.require_topics([name])
    futures = session.admin.create_partitions(
        [NewPartitions(name, total)], request_timeout=session.timeout
    )
    session.result(futures[name], f"add partitions to topic {name}")
    return True
