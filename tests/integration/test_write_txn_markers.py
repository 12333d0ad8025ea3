"""WriteTxnMarkers (API 27) on the wire: markers end transactions as a coordinator's do,
and the log refuses the ones Kafka refuses. One broker for the module; topics, producer
ids and groups are unique per test."""

from __future__ import annotations

import resource
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from onceflow.protocol.client import WireClient
from onceflow.testing import unique_name
from tests.kit.clients import consume, values

LONG_TRANSACTION_MS = 600_000  # the coordinator must not abort the open transactions itself


@pytest.fixture
def topic(kafka_topic_factory, kafka_module_broker) -> str:
    return kafka_topic_factory(broker=kafka_module_broker)


@pytest.fixture
def bootstrap(kafka_module_broker) -> str:
    return kafka_module_broker.bootstrap


def marker(
    producer_id: int,
    producer_epoch: int,
    partitions: dict[str, tuple[int, ...]],
    *,
    committed: bool = False,
    coordinator_epoch: int = 0,
) -> WritableTxnMarker:
    return WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_result=committed,
        topics=tuple(
            WritableTxnMarkerTopic(name=name, partition_indexes=numbers)
            for name, numbers in partitions.items()
        ),
        coordinator_epoch=coordinator_epoch,
    )


def write_markers(bootstrap: str, *markers: WritableTxnMarker) -> dict[tuple, ErrorCode]:
    """{(producer id, topic, partition): error code} of one WriteTxnMarkers request."""
    with WireClient(bootstrap) as wire:
        response = wire.request(WriteTxnMarkersRequest, markers=markers)
    return {
        (result.producer_id, topic.name, partition.partition_index): partition.error_code
        for result in response.markers
        for topic in result.topics
        for partition in topic.partitions
    }


def open_transactions(bootstrap: str, topic: str, partition: int = 0) -> dict[int, tuple]:
    """{producer id: (epoch, coordinator epoch, txn start offset)} from DescribeProducers."""
    with WireClient(bootstrap) as wire:
        response = wire.request(
            DescribeProducersRequest,
            topics=(TopicRequest(name=topic, partition_indexes=(partition,)),),
        )
    (answer,) = response.topics[0].partitions
    assert answer.error_code == ErrorCode.none
    return {
        p.producer_id: (p.producer_epoch, p.coordinator_epoch, p.current_txn_start_offset)
        for p in answer.active_producers
    }


def plain_produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=value)
    assert producer.flush(10) == 0


def open_transaction(bootstrap: str, topic: str, value: bytes) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": unique_name("open"),
            "transaction.timeout.ms": LONG_TRANSACTION_MS,
        }
    )
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, value=value)
    assert producer.flush(10) == 0
    return producer


def read_committed(
    bootstrap: str, topic: str, expected: int | None = None, seconds: float = 5
) -> list[bytes | None]:
    """The values a read_committed consumer gets: ``expected`` of them (failing if fewer
    come within ``seconds``), or without ``expected`` all it gets until a second passes
    with nothing new."""
    messages = consume(
        bootstrap, topic, expected, partitions=[0], isolation="read_committed", timeout=seconds
    )
    return values(messages)


def last_stable_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    consumer.close()
    return high


@pytest.mark.parametrize("committed", [False, True], ids=["abort", "commit"])
def test_a_marker_ends_an_open_transaction(bootstrap, topic, committed):
    plain_produce(bootstrap, topic, b"before")
    producer = open_transaction(bootstrap, topic, b"open")
    plain_produce(bootstrap, topic, b"after")
    assert read_committed(bootstrap, topic, 1) == [b"before"]
    assert last_stable_offset(bootstrap, topic) == 1
    ((producer_id, (epoch, _, start)),) = open_transactions(bootstrap, topic).items()
    assert start == 1

    key = (producer_id, topic, 0)
    ending = marker(producer_id, epoch, {topic: (0,)}, committed=committed)
    assert write_markers(bootstrap, ending) == {key: ErrorCode.none}

    expected = [b"before", b"open", b"after"] if committed else [b"before", b"after"]
    assert read_committed(bootstrap, topic, len(expected)) == expected
    assert last_stable_offset(bootstrap, topic) == 4  # three records and the marker
    assert open_transactions(bootstrap, topic)[producer_id] == (epoch, 0, -1)
    # Again: nothing is open any more, so the second marker changes nothing visible.
    assert write_markers(bootstrap, ending) == {key: ErrorCode.none}
    assert read_committed(bootstrap, topic) == expected
    del producer


def test_markers_refused_as_kafka_refuses_them(bootstrap, topic):
    """Fenced producer epoch, fenced coordinator epoch, unknown topic or partition: each
    partition answers its own error and nothing is appended for it."""
    producer_id = 1_000_000 + uuid.uuid4().int % 1_000_000  # no producer of this broker's
    first = marker(producer_id, 3, {topic: (0,)}, coordinator_epoch=7)
    assert write_markers(bootstrap, first) == {(producer_id, topic, 0): ErrorCode.none}
    assert open_transactions(bootstrap, topic)[producer_id] == (3, 7, -1)
    end_offset = last_stable_offset(bootstrap, topic)

    fenced_producer = marker(producer_id, 2, {topic: (0,)}, coordinator_epoch=7)
    assert write_markers(bootstrap, fenced_producer) == {
        (producer_id, topic, 0): ErrorCode.invalid_producer_epoch
    }
    fenced_coordinator = marker(producer_id, 3, {topic: (0,)}, coordinator_epoch=6)
    assert write_markers(bootstrap, fenced_coordinator) == {
        (producer_id, topic, 0): ErrorCode.transaction_coordinator_fenced
    }
    unknown = marker(producer_id, 3, {topic: (1,), "no-such-topic": (0,)}, coordinator_epoch=7)
    assert write_markers(bootstrap, unknown) == {
        (producer_id, topic, 1): ErrorCode.unknown_topic_or_partition,
        (producer_id, "no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert last_stable_offset(bootstrap, topic) == end_offset
    assert open_transactions(bootstrap, topic)[producer_id] == (3, 7, -1)

    newer = marker(producer_id, 4, {topic: (0,)}, committed=True, coordinator_epoch=8)
    assert write_markers(bootstrap, newer) == {(producer_id, topic, 0): ErrorCode.none}
    assert open_transactions(bootstrap, topic)[producer_id] == (4, 8, -1)


def test_an_abort_marker_drops_a_hanging_transactions_offset_commit(bootstrap, topic):
    """A marker on __consumer_offsets settles the transaction's pending offsets, as the
    coordinator's marker does: after an abort the group has no committed offset."""
    group = unique_name("txn-group")
    producer = open_transaction(bootstrap, topic, b"open")
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 1)], reader.consumer_group_metadata(), 10
    )
    with pytest.raises(KafkaException, match=r"UNSTABLE_OFFSET_COMMIT|_TIMED_OUT"):
        reader.committed([TopicPartition(topic, 0)], 1)  # the pending offset blocks it
    offsets_topic = "__consumer_offsets"
    pending = {
        number: producers
        for number in reader.list_topics(offsets_topic, 10).topics[offsets_topic].partitions
        if (producers := open_transactions(bootstrap, offsets_topic, number))
    }
    ((number, producers),) = pending.items()
    ((producer_id, (epoch, _, _)),) = producers.items()

    ending = marker(producer_id, epoch, {offsets_topic: (number,), topic: (0,)})
    assert set(write_markers(bootstrap, ending).values()) == {ErrorCode.none}
    (committed,) = reader.committed([TopicPartition(topic, 0)], 10)
    assert committed.offset < 0  # no offset: the transaction's commit was dropped
    reader.close()
    del producer


def test_a_marker_the_disk_refuses_answers_kafka_storage_error(
    kafka_broker_process, kafka_topic_factory
):
    """RLIMIT_FSIZE fails the broker's write as a full disk would: the marker answers
    KAFKA_STORAGE_ERROR, leaves no trace, and succeeds once the disk takes writes again.
    The limit is the broker process's own: it needs a broker in a process of its own."""
    broker = kafka_broker_process
    topic = kafka_topic_factory(broker=broker)
    bootstrap = broker.bootstrap
    producer = open_transaction(bootstrap, topic, b"open")
    ((producer_id, (epoch, _, start)),) = open_transactions(bootstrap, topic).items()
    segment = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))[-1]
    ending = marker(producer_id, epoch, {topic: (0,)})
    limit = resource.RLIM_INFINITY
    resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (segment.stat().st_size, limit))
    try:
        refused = write_markers(bootstrap, ending)
    finally:
        resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (limit, limit))
    assert refused == {(producer_id, topic, 0): ErrorCode.kafka_storage_error}
    assert open_transactions(bootstrap, topic)[producer_id] == (epoch, -1, start)
    assert last_stable_offset(bootstrap, topic) == start

    assert write_markers(bootstrap, ending) == {(producer_id, topic, 0): ErrorCode.none}
    assert last_stable_offset(bootstrap, topic) == start + 2  # the aborted record, the marker
    assert read_committed(bootstrap, topic) == []
    del producer
