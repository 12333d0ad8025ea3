"""Step builders for records: Produce (and the batches it carries), Fetch, ListOffsets,
and what a reader sees of a partition. Scenarios import this module as ``rs``."""

from __future__ import annotations

from typing import Any

from tests.differential.driver import Step
from tests.differential.records import Batch
from tests.differential.step_values import TopicId

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def produce(
    client: str,
    topic_name: str,
    batch: Batch | None,
    partition: int = 0,
    acks: int = -1,
    transactional_id: str | None = None,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        0,
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout": 10000,
            "topic_data": [
                {"name": topic_name, "partition_data": [{"index": partition, "records": batch}]}
            ],
        },
        version,
        label=label,
        wait_until=None if acks == 0 else not_leader_free,
    )


def not_leader_free(response: Any) -> bool:
    """Kafka answers NOT_LEADER_OR_FOLLOWER, with nothing appended, while the transaction
    verification cannot reach the coordinator yet; a producer sends again, so does this."""
    if isinstance(response, dict):
        return True
    return all(p.error_code != 6 for t in response.responses for p in t.partition_responses)


def barrier(client: str) -> Step:
    """A Metadata request for no topic on ``client``'s connection: a broker serves one
    connection's requests in order, so what the client sent before (an acks=0 produce,
    which has no answer) was handled when this is answered (durable is another matter:
    onceflow's high watermark waits for the fsync); Kafka closes the connection instead
    when that produce failed."""
    return Step(client, 3, {"topics": [], "allow_auto_topic_creation": False}, label="barrier")


def batch(
    *values: bytes,
    producer: str | None = None,
    sequence: int = -1,
    transactional: bool = False,
    **kw,
) -> Batch:
    return Batch(tuple(values), producer, sequence, transactional, **kw)


def fetch(
    client: str,
    topic_name: str,
    offset: int = 0,
    partition: int = 0,
    isolation: int = READ_UNCOMMITTED,
    max_bytes: int = 1 << 20,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        1,
        {
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": max_bytes,
            "isolation_level": isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic_name,
                    "topic_id": TopicId(topic_name),
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": max_bytes,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        version,
        label=label,
    )


def list_offsets(
    client: str,
    topic_name: str,
    timestamp: int = LATEST,
    partition: int = 0,
    isolation: int = READ_UNCOMMITTED,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        2,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [
                {
                    "name": topic_name,
                    "partitions": [
                        {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1}
                    ],
                }
            ],
        },
        version,
        label=label,
    )


def offsets_view(client: str, topic_name: str, partition: int = 0) -> list[Step]:
    """What a reader sees: ListOffsets earliest/latest/LSO and both fetch isolations."""
    return [
        list_offsets(client, topic_name, EARLIEST, partition, label="earliest"),
        list_offsets(client, topic_name, LATEST, partition, label="latest (HW)"),
        list_offsets(
            client, topic_name, LATEST, partition, READ_COMMITTED, label="latest committed (LSO)"
        ),
        fetch(client, topic_name, 0, partition, READ_UNCOMMITTED, label="fetch read_uncommitted"),
        fetch(client, topic_name, 0, partition, READ_COMMITTED, label="fetch read_committed"),
    ]
