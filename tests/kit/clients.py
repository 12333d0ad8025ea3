"""Topics, their configs, producing and consuming with confluent-kafka, against any broker:
onceflow's (one node) or an Apache Kafka cluster (replicated topics)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from onceflow.kafka_cluster.probe import node_metadata
from onceflow.testing import unique_name
from tests.kit.wait import wait_until

TIMEOUT = 30.0
Headers = list[tuple[str, bytes | None]]


def admin(bootstrap: str, **config: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **config})


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replicas: int | None = None,
    client: Mapping[str, Any] | None = None,
    **config: str,
) -> None:
    """Create a topic (settings: ``config``) and wait until every broker knows a leader
    for each partition. ``replicas`` defaults to min(3, brokers): 1 on onceflow's broker,
    3 on a cluster; ``client`` adds AdminClient settings (credentials, TLS)."""
    client = admin(bootstrap, **(client or {}))  # kept alive until the topic exists
    brokers = list(client.list_topics(timeout=TIMEOUT).brokers.values())
    replicas = replicas or min(3, len(brokers))
    new = NewTopic(name, partitions, replicas, config=config)
    client.create_topics([new])[name].result(TIMEOUT)
    if len(brokers) > 1:
        for broker in brokers:
            address = f"{broker.host}:{broker.port}"
            wait_until(
                lambda a=address: _knows(a, name, partitions),
                TIMEOUT,
                what=f"{address} knows {name}",
            )


def describe_configs(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    """DescribeConfigs of one resource (a topic, or a broker by its id): name -> entry."""
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def alter_configs(admin: AdminClient, kind: ResourceType, name: str, *entries: ConfigEntry) -> None:
    """IncrementalAlterConfigs of one resource: each entry with its operation (``config_op``)."""
    resource = ConfigResource(kind, name, incremental_configs=list(entries))
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def config_op(
    name: str, value: str | None, operation: AlterConfigOpType = AlterConfigOpType.SET
) -> ConfigEntry:
    """One change of an incremental alter: set ``name`` to ``value`` (or delete, append...)."""
    return ConfigEntry(name, value, incremental_operation=operation)


def new_topic(
    bootstrap: str,
    hint: str = "topic",
    partitions: int = 1,
    client: Mapping[str, Any] | None = None,
    **config: str,
) -> str:
    """``create_topic`` under a name no other test uses (``unique_name(hint)``); the name."""
    name = unique_name(hint)
    create_topic(bootstrap, name, partitions, client=client, **config)
    return name


def _knows(address: str, topic: str, partitions: int) -> bool:
    """The broker at ``address`` knows a leader for every partition of ``topic``."""
    try:
        leaders = node_metadata(address, (topic,)).leaders.get(topic, {})
    except OSError:
        return False
    return len(leaders) == partitions and all(leader >= 0 for leader in leaders.values())


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | str | None],
    *,
    partition: int | None = None,
    partitions: int | None = None,
    key: bytes | str | None = None,
    keys: Sequence[bytes | str | None] | None = None,
    headers: Headers | None = None,
    **config: Any,
) -> list[tuple[int, int]]:
    """Produce every value (acks=all, or ``config``'s) and flush; the (partition, offset)
    each got, in order. ``partition`` sends all to one partition, ``partitions=N``
    round-robin over N (the n-th value to n % N); otherwise the client's partitioner
    decides. ``key`` is every record's key, ``keys`` one per value."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, **config})
    delivered: dict[int, tuple[int, int]] = {}

    def on_delivery(number: int):
        def record(error, message) -> None:
            assert error is None, error
            delivered[number] = (message.partition(), message.offset())

        return record

    for number, value in enumerate(values):
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        elif partitions:
            extra["partition"] = number % partitions
        if keys is not None:
            extra["key"] = keys[number]
        elif key is not None:
            extra["key"] = key
        if headers is not None:
            extra["headers"] = headers
        producer.produce(topic, value, on_delivery=on_delivery(number), **extra)
        if number % 1000 == 999:
            producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "records left undelivered"
    return [delivered[number] for number in sorted(delivered)]


def consume(
    bootstrap: str,
    topic: str,
    expected: int | None = None,
    *,
    partitions: Iterable[int] | None = None,
    isolation: str = "read_uncommitted",
    timeout: float = TIMEOUT,
    idle: float = 1.0,
    strict: bool = False,
    **config: Any,
) -> list[Message]:
    """Every record of ``topic`` (or of ``partitions``) from the log start, read by an
    assigned consumer: until ``expected`` records arrived (then ``idle`` seconds more, to
    see any extra), or without ``expected`` until nothing came for ``idle`` seconds.
    A consumer error is passed over, or with ``strict`` fails the read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kit-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            **config,
        }
    )
    try:
        if partitions is None:
            metadata = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic]
            partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Message] = []
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            batch = []
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    batch.append(message)
                else:
                    assert not strict, message.error()
            messages += batch
            if batch:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= idle and (
                expected is None or len(messages) >= expected
            ):
                return messages
        if expected is not None:
            raise AssertionError(f"{len(messages)} of {expected} records within {timeout}s")
        return messages
    finally:
        consumer.close()


def values(messages: Iterable[Message]) -> list[bytes | None]:
    return [message.value() for message in messages]
