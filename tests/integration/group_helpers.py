"""Helpers shared by the consumer group tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, NewTopic

T = TypeVar("T")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)


def produce(
    bootstrap: str, topic: str, count: int, partitions: int, start: int = 0
) -> set[tuple[int, int]]:
    """Produce ``count`` records round-robin over the partitions; (partition, offset)s."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    delivered: set[tuple[int, int]] = set()

    def on_delivery(error, message) -> None:
        assert error is None, error
        delivered.add((message.partition(), message.offset()))

    for number in range(start, start + count):
        producer.produce(
            topic,
            value=str(number).encode(),
            partition=number % partitions,
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert len(delivered) == count
    return delivered


def wait_until(check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


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
