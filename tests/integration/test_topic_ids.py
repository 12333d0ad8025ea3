"""Topic ids (KIP-516): CreateTopics returns them, Metadata answers and looks them up, Fetch
v13+ and DeleteTopics v6 name topics by them, and they survive a restart."""

from __future__ import annotations

import datetime
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from tests.kit.batches import decode
from tests.kit.wire import create_topic, fetch_topic

# One broker for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("topic-ids")


def topic_id_of(client: WireClient, name: str) -> uuid.UUID:
    response = client.request(
        MetadataRequest,
        topics=(MetadataRequestTopic(name=name, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return response.topics[0].topic_id


def metadata_by_id(client: WireClient, topic_id: uuid.UUID) -> tuple[ErrorCode, str | None]:
    response = client.request(
        MetadataRequest,
        topics=(MetadataRequestTopic(name=None, topic_id=topic_id),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = response.topics
    return topic.error_code, topic.name


def fetch_by_id(client: WireClient, topic_id: uuid.UUID) -> tuple[uuid.UUID, ErrorCode, bytes]:
    topic = fetch_topic(client, topic_id)
    (partition,) = topic.partitions
    return topic.topic_id, partition.error_code, partition.records or b""


def test_fetch_v13_and_metadata_by_topic_id(broker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in (b"a", b"b"):
        producer.produce("by-id", value=value)
    assert producer.flush(10) == 0
    with WireClient(broker.bootstrap) as client:
        topic_id = topic_id_of(client, "by-id")
        assert topic_id is not None and topic_id.int != 0
        assert metadata_by_id(client, topic_id) == (ErrorCode.none, "by-id")
        answered_id, code, records = fetch_by_id(client, topic_id)
        assert (answered_id, code) == (topic_id, ErrorCode.none)
        assert [value for _, value in decode(records)] == [b"a", b"b"]
        unknown = uuid.uuid4()
        assert metadata_by_id(client, unknown)[0] == ErrorCode.unknown_topic_id
        assert fetch_by_id(client, unknown)[:2] == (unknown, ErrorCode.unknown_topic_id)


def test_librdkafka_consumes_with_the_newest_fetch(broker) -> None:
    """librdkafka negotiates Fetch v13+ now that the broker offers it."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("newest-fetch", value=b"hello")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "newest-fetch",
            "auto.offset.reset": "earliest",
            "debug": "protocol",
            "logger": (logged := _Lines()),
        }
    )
    consumer.subscribe(["newest-fetch"])
    try:
        message = None
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.value() == b"hello"
    finally:
        consumer.close()
    marker = "Sent FetchRequest (v"
    versions = {int(line.split(marker)[1].split(",")[0]) for line in logged.lines if marker in line}
    assert max(versions) >= 13, versions


def test_delete_topics_by_id_and_ids_survive_a_restart(kafka_broker_process) -> None:
    with WireClient(kafka_broker_process.bootstrap) as client:
        assert create_topic(client, "kept")[0] == 0
        assert create_topic(client, "dropped")[0] == 0
        kept, dropped = topic_id_of(client, "kept"), topic_id_of(client, "dropped")
        response = client.request(
            DeleteTopicsRequest,
            topics=(DeleteTopicState(name=None, topic_id=dropped),),
            timeout=datetime.timedelta(seconds=10),
        )
        (result,) = response.responses
        assert (result.error_code, result.name, result.topic_id) == (0, "dropped", dropped)
    kafka_broker_process.restart(kill=True)
    with WireClient(kafka_broker_process.bootstrap) as client:
        assert topic_id_of(client, "kept") == kept
        assert metadata_by_id(client, kept) == (ErrorCode.none, "kept")
        assert metadata_by_id(client, dropped)[0] == ErrorCode.unknown_topic_id


class _Lines:
    """A librdkafka logger that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, level: int, fmt: str, *args: object) -> None:
        self.lines.append(fmt % args if args else fmt)
