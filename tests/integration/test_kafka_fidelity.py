"""Places where the broker answered differently from Apache Kafka 3.9, each checked with a
real client (confluent-kafka, kafka-python) or, where no client exposes the detail, with
the exact request over the wire. One broker serves the whole module."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from onceflow.protocol.client import WireClient
from onceflow.testing import BrokerProcess
from tests.integration.wire import record_batch


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("fidelity") / "data",
        config={"group.min.session.timeout.ms": "1000"},
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})


def new_topic(admin: AdminClient, partitions: int = 1, **config: str) -> str:
    name = f"fidelity-{uuid.uuid4().hex[:8]}"
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([topic])[name].result(10)
    return name


def list_offset(admin: AdminClient, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    partition = TopicPartition(topic, 0)
    info = admin.list_offsets({partition: spec})[partition].result(10)
    return info.offset, info.timestamp


# -- ListOffsets by timestamp: per record, not per batch ---------------------------------


def test_list_offsets_by_timestamp_finds_the_record_inside_a_batch(broker, admin) -> None:
    topic = new_topic(admin)
    base = int(time.time() * 1000) - 60_000
    stamps = [base, base + 2000, base + 1000]  # one batch; the largest is the middle one
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
    for index, stamp in enumerate(stamps):
        producer.produce(topic, key=b"k", value=f"v{index}".encode(), timestamp=stamp)
    assert producer.flush(10) == 0

    assert list_offset(admin, topic, OffsetSpec.for_timestamp(base)) == (0, base)
    assert list_offset(admin, topic, OffsetSpec.for_timestamp(base + 500)) == (1, base + 2000)
    assert list_offset(admin, topic, OffsetSpec.for_timestamp(base + 2000)) == (1, base + 2000)
    assert list_offset(admin, topic, OffsetSpec.for_timestamp(base + 2001))[0] == -1
    assert list_offset(admin, topic, OffsetSpec.max_timestamp()) == (1, base + 2000)
    assert list_offset(admin, topic, OffsetSpec.latest())[0] == 3


# -- a record without a key sent to a compacted topic -----------------------------------


def test_compacted_topic_rejects_records_without_a_key(broker, admin) -> None:
    topic = new_topic(admin, **{"cleanup.policy": "compact"})
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "retries": 0})
    producer.produce(topic, key=b"kept", value=b"a")
    assert producer.flush(10) == 0
    producer.produce(topic, value=b"no key", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(10) == 0
    assert [error.code() for error in errors] == [KafkaError.INVALID_RECORD]
    assert list_offset(admin, topic, OffsetSpec.latest())[0] == 1  # nothing appended


def test_compacted_topic_names_each_keyless_record(broker, admin) -> None:
    topic = new_topic(admin, **{"cleanup.policy": "compact"})
    batch = record_batch([b"a", b"b", b"c"], keys=[b"k", None, None])
    with WireClient(broker.bootstrap) as client:
        response = client.request(
            ProduceRequest,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                TopicProduceData(
                    name=topic,
                    partition_data=(PartitionProduceData(index=0, records=batch),),
                ),
            ),
        )
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == KafkaError.INVALID_RECORD
    assert [e.batch_index for e in partition.record_errors] == [1, 2]
    assert partition.record_errors[0].batch_index_error_message == (
        f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    )
    assert "2 record errors" in partition.error_message
