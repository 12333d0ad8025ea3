"""Read a topic from its log start to the last stable offset of each partition.

A confluent-kafka consumer in assign mode (no group, nothing committed) reads every
partition up to the offsets ``topic_ranges`` found, so open transactions are excluded and
the read ends.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.admin.connect import principal_of
from onceflow.admin.topics import partition_problem
from onceflow.verify.sources.errors import SourceError, SourceNotAuthorized, SourceNotFound

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

Cluster = str | Mapping[str, Any]  # bootstrap servers, or a whole librdkafka client config


def client_conf(cluster: Cluster) -> dict[str, Any]:
    """The librdkafka config of ``cluster`` (quiet: errors are raised, not logged)."""
    if isinstance(cluster, str):
        return {"bootstrap.servers": cluster, "log_level": 0}
    return {"log_level": 0, **cluster}


def matching_topics(cluster: Cluster, pattern: str, timeout: float = 15.0) -> list[str]:
    """Topics whose whole name matches the regular expression (internal ones left out)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient(client_conf(cluster)).list_topics(timeout=timeout)
    except KafkaException as error:
        raise SourceError(f"cannot list topics: {error}") from None
    regex = re.compile(pattern)
    return sorted(
        name
        for name, topic in metadata.topics.items()
        if topic.error is None and not name.startswith("__") and regex.fullmatch(name)
    )


@dataclass(frozen=True, slots=True)
class PartitionRange:
    start: int  # log start offset
    stable: int  # last stable offset (end of the read_committed view)
    high: int  # high watermark


@dataclass(frozen=True, slots=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


LEADER_RETRY_S = 0.2


def topic_ranges(
    bootstrap: Cluster, topic: str, timeout: float = 15.0
) -> dict[int, PartitionRange]:
    """Log start, last stable offset and high watermark of every partition of ``topic``."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from onceflow.client_errors import leader_moving

    admin = AdminClient(client_conf(bootstrap))
    try:
        metadata = admin.list_topics(timeout=timeout)  # all topics: never auto-create
    except KafkaException as error:
        raise SourceError(f"topic {topic!r}: cannot read the cluster's metadata: {error}") from None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        _require_topic(admin, topic, timeout, principal_of(client_conf(bootstrap)))
        reason = described.error if described is not None else "not found"
        raise SourceError(f"topic {topic!r}: {reason}")
    partitions = sorted(described.partitions)
    for number in partitions:
        problem = partition_problem(described.partitions[number].error)
        if problem is not None:
            raise SourceError(f"topic {topic!r}: partition {topic}-{number} is {problem}")

    deadline = time.monotonic() + timeout

    def query(spec: Any, isolation: Any) -> dict[int, int]:
        nonlocal admin
        while True:
            futures = admin.list_offsets(
                {TopicPartition(topic, p): spec for p in partitions},
                isolation_level=isolation,
                request_timeout=timeout,
            )
            try:
                return {tp.partition: future.result().offset for tp, future in futures.items()}
            except KafkaException as error:  # a leader moving: ask again, as Kafka's clients do
                if not leader_moving(error) or time.monotonic() > deadline:
                    raise
            time.sleep(LEADER_RETRY_S)
            # with metadata of now: librdkafka's admin client kept sending a leader epoch the
            # leader had fenced (FENCED_LEADER_EPOCH) for 30 s after a node's restart
            admin = AdminClient(client_conf(bootstrap))

    start = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    stable = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return {p: PartitionRange(start[p], stable[p], high[p]) for p in partitions}


HEALTH_CHECK_S = 1.0  # how often a read asks Metadata whether its partitions are online


def _require_online(consumer: Any, topic: str, partitions: Iterable[int]) -> None:
    """SourceError naming the first of ``partitions`` that Metadata reports offline."""
    from confluent_kafka import KafkaException

    try:
        described = consumer.list_topics(topic, timeout=5).topics.get(topic)
    except KafkaException:
        return  # unreachable now: the read's own deadline reports it
    if described is None:
        return
    for number in sorted(partitions):
        found = described.partitions.get(number)
        problem = partition_problem(found.error) if found is not None else None
        if problem is not None:
            raise SourceError(f"topic {topic!r}: partition {topic}-{number} is {problem}")


def _require_topic(admin: Any, topic: str, timeout: float, principal: str) -> None:
    """SourceNotFound or SourceNotAuthorized for a topic missing from the metadata."""
    from confluent_kafka import KafkaException, TopicCollection

    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as error:
        code = error.args[0].name() if error.args else ""
        if code.endswith("_AUTHORIZATION_FAILED"):
            raise SourceNotAuthorized(
                f"topic {topic!r}: not authorized ({code}, principal {principal})"
            ) from None
        if code in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
            raise SourceNotFound(f"topic {topic!r} does not exist") from None


def read_topic(
    bootstrap: Cluster,
    topic: str,
    ranges: dict[int, PartitionRange],
    isolation: str = READ_COMMITTED,
    timeout: float = 60.0,
) -> list[RawRecord]:
    """Every record of ``topic`` from log start up to each partition's stable offset."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from onceflow.client_errors import is_fatal

    ends = {p: r.stable for p, r in ranges.items()}
    pending = {p for p, r in ranges.items() if r.start < r.stable}
    if not pending:
        return []
    consumer = Consumer(
        {
            **client_conf(bootstrap),
            "group.id": "onceflow-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    records: list[RawRecord] = []
    try:
        consumer.assign([TopicPartition(topic, p, ranges[p].start) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        next_health_check = time.monotonic() + HEALTH_CHECK_S
        while pending:
            if time.monotonic() > deadline:
                raise SourceError(
                    f"topic {topic!r}: partitions {sorted(pending)} not read to their end "
                    f"within {timeout:.0f} s"
                )
            if time.monotonic() > next_health_check:
                # librdkafka retries a partition that went offline in silence: ask Metadata.
                _require_online(consumer, topic, pending)
                next_health_check = time.monotonic() + HEALTH_CHECK_S
            for message in consumer.consume(1000, 0.5):
                partition = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= ends[partition]:
                            pending.discard(partition)
                        continue
                    if is_fatal(error):
                        raise SourceError(f"topic {topic!r}: {error}")
                    continue
                offset = message.offset()
                if offset >= ends[partition]:
                    pending.discard(partition)
                    continue
                records.append(RawRecord(partition, offset, message.key(), message.value()))
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
            for position in consumer.position([TopicPartition(topic, p) for p in sorted(pending)]):
                if position.offset >= 0 and position.offset >= ends[position.partition]:
                    pending.discard(position.partition)
    finally:
        consumer.close()
    return records
