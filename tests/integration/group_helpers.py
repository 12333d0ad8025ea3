"""Helpers shared by the consumer group tests: confluent-kafka consumers as the group
tests configure them, polling, committed offsets, and described groups."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

FAST_GROUPS = {"group.min.session.timeout.ms": "1000"}


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,  # the broker's default group.min.session.timeout.ms
            "heartbeat.interval.ms": 300,
            "fetch.wait.max.ms": 100,
            **extra,
        }
    )


def poll_records(c: Consumer, count: int, timeout: float = 30.0) -> list:
    records = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        message = c.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        records.append(message)
    assert len(records) == count, f"got {len(records)} of {count} records"
    return records


def drain(c: Consumer, idle: float = 0.3) -> list:
    """Poll until nothing arrives for ``idle`` seconds."""
    records = []
    while (message := c.poll(idle)) is not None:
        assert message.error() is None, message.error()
        records.append(message)
    return records


def committed(c: Consumer, topic: str, partitions: int) -> list[int]:
    tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return [tp.offset for tp in tps]


def numbered(count: int, start: int = 0) -> list[bytes]:
    """The values "start", "start+1", ... as the group tests produce them."""
    return [str(number).encode() for number in range(start, start + count)]


def describe_group(admin: AdminClient, group: str) -> ConsumerGroupDescription:
    return admin.describe_consumer_groups([group])[group].result(10)


def assignments(description: ConsumerGroupDescription) -> dict[str, set[tuple[str, int]]]:
    """client id -> assigned (topic, partition)s of a described group."""
    return {
        member.client_id: {
            (tp.topic, tp.partition) for tp in member.assignment.topic_partitions or ()
        }
        for member in description.members
    }
