"""Helpers shared by the consumer group tests."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConsumerGroupDescription


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
