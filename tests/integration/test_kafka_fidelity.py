"""Places where the broker answered differently from Apache Kafka 3.9, each checked with a
real client (confluent-kafka, kafka-python) or, where no client exposes the detail, with
the exact request over the wire. One broker serves the whole module."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i8, i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.legacy.list_offsets_v0 import ListOffsetsPartition as ListOffsetsPartitionV0
from onceflow.protocol.legacy.list_offsets_v0 import ListOffsetsRequest as ListOffsetsRequestV0
from onceflow.protocol.legacy.list_offsets_v0 import ListOffsetsTopic as ListOffsetsTopicV0
from onceflow.testing import PluginBroker
from tests.kit.batches import record_batch
from tests.kit.clients import alter_configs, config_op, describe_configs, new_topic

# One broker for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("kafka-fidelity")


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    return {"group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def admin(broker: PluginBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})


def list_offset(admin: AdminClient, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    partition = TopicPartition(topic, 0)
    info = admin.list_offsets({partition: spec})[partition].result(10)
    return info.offset, info.timestamp


# -- ListOffsets by timestamp: per record, not per batch ---------------------------------


def test_list_offsets_by_timestamp_finds_the_record_inside_a_batch(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "fidelity")
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
    topic = new_topic(broker.bootstrap, "fidelity", **{"cleanup.policy": "compact"})
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "retries": 0})
    producer.produce(topic, key=b"kept", value=b"a")
    assert producer.flush(10) == 0
    producer.produce(topic, value=b"no key", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(10) == 0
    assert [error.code() for error in errors] == [KafkaError.INVALID_RECORD]
    assert list_offset(admin, topic, OffsetSpec.latest())[0] == 1  # nothing appended


def test_compacted_topic_names_each_keyless_record(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "fidelity", **{"cleanup.policy": "compact"})
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


# -- topic configs as Kafka 3.9 has them ------------------------------------------------


def test_deprecated_topic_configs_are_accepted_and_listed(broker, admin) -> None:
    topic = new_topic(
        broker.bootstrap,
        "fidelity",
        **{
            "message.format.version": "0.10.0.0",
            "message.timestamp.difference.max.ms": "60000",
            "message.downconversion.enable": "false",
        },
    )
    configs = describe_configs(admin, ResourceType.TOPIC, topic)
    assert configs["message.format.version"].value == "0.10.0.0"
    assert configs["message.timestamp.difference.max.ms"].value == "60000"
    assert configs["message.downconversion.enable"].value == "false"
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        assert configs[name].value == ""
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value
    refused = NewTopic(f"{topic}-bad", 1, 1, config={"message.format.version": "banana"})
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([refused])[refused.topic].result(10)
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_subtracting_the_last_cleanup_policy_leaves_an_empty_list(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "fidelity", **{"cleanup.policy": "compact"})
    alter_configs(
        admin,
        ResourceType.TOPIC,
        topic,
        config_op("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT),
    )
    assert describe_configs(admin, ResourceType.TOPIC, topic)["cleanup.policy"].value == ""


def test_describe_configs_answers_synonyms(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "fidelity", **{"retention.ms": "3600000"})
    entry = describe_configs(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    synonyms = {name: (s.value, s.source) for name, s in entry.synonyms.items()}
    assert synonyms == {
        "retention.ms": ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        "log.retention.ms": ("604800000", ConfigSource.DEFAULT_CONFIG.value),
    }


# -- the broker resource ----------------------------------------------------------------


def test_broker_configs_list_the_listeners(broker, admin) -> None:
    configs = describe_configs(admin, ResourceType.BROKER, "0")
    assert configs["advertised.listeners"].value == f"PLAINTEXT://{broker.bootstrap}"
    assert configs["advertised.listeners"].is_read_only
    assert configs["node.id"].value == "0"
    assert not configs["log.retention.ms"].is_read_only
    assert configs["num.partitions"].is_read_only


def set_cluster_default(bootstrap: str, name: str, value: str) -> None:
    """IncrementalAlterConfigs on the cluster-wide BROKER resource (""), which librdkafka
    cannot name."""
    with WireClient(bootstrap) as client:
        response = client.request(
            IncrementalAlterConfigsRequest,
            validate_only=False,
            resources=(
                AlterConfigsResource(
                    resource_type=i8(ResourceType.BROKER.value),
                    resource_name="",
                    configs=(AlterableConfig(name=name, config_operation=i8(0), value=value),),
                ),
            ),
        )
    assert [r.error_code for r in response.responses] == [0]


def test_dynamic_broker_configs_apply_at_once_and_survive_a_restart(kafka_broker_process) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_broker_process.bootstrap, "log_level": 3})
    topic = new_topic(kafka_broker_process.bootstrap, "fidelity")
    retention = "log.retention.ms"
    set_cluster_default(kafka_broker_process.bootstrap, retention, "7000")
    alter_configs(admin, ResourceType.BROKER, "0", config_op(retention, "5000"))
    entry = describe_configs(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    with pytest.raises(KafkaException) as failure:
        alter_configs(
            admin,
            ResourceType.BROKER,
            "0",
            config_op("num.partitions", "3"),
        )
    assert failure.value.args[0].code() == KafkaError.INVALID_REQUEST

    kafka_broker_process.restart(kill=True)
    admin = AdminClient({"bootstrap.servers": kafka_broker_process.bootstrap, "log_level": 3})
    entry = describe_configs(admin, ResourceType.BROKER, "0")[retention]
    assert (entry.value, entry.source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter_configs(
        admin, ResourceType.BROKER, "0", config_op(retention, None, AlterConfigOpType.DELETE)
    )
    entry = describe_configs(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


# -- static members expire on their own session timeout ----------------------------------


def group_state(admin: AdminClient, group: str) -> tuple[str, int]:
    (description,) = (admin.describe_consumer_groups([group])[group].result(10),)
    return description.state.name, len(description.members)


def test_static_members_expire_after_their_own_session_timeout(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "fidelity", partitions=3)
    group = f"static-{uuid.uuid4().hex[:8]}"
    consumers = [
        Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "group.instance.id": f"instance-{index}",
                "session.timeout.ms": 2000 + 1000 * index,
                "heartbeat.interval.ms": 100,
                "log_level": 3,
            }
        )
        for index in range(3)
    ]
    for consumer in consumers:
        consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while group_state(admin, group) != ("STABLE", 3):
        assert time.monotonic() < deadline, group_state(admin, group)
        for consumer in consumers:
            consumer.poll(0.05)
    settle = time.monotonic() + 1
    while time.monotonic() < settle:
        for consumer in consumers:
            consumer.poll(0.05)
    closed = time.monotonic()
    for consumer in consumers:
        consumer.close()
    members_over_time = []
    while time.monotonic() - closed < 5:
        members_over_time.append(
            (round(time.monotonic() - closed, 2), group_state(admin, group)[1])
        )
        time.sleep(0.1)
    gone = {count: min(t for t, c in members_over_time if c <= count) for count in (2, 1, 0)}
    assert 1.7 <= gone[2] <= 2.5 and 2.7 <= gone[1] <= 3.5 and 3.7 <= gone[0] <= 4.5, gone
    result = admin.delete_consumer_groups([group])[group].result(10)
    assert result is None


# -- acks=1: acknowledged means visible -------------------------------------------------


def test_acks_1_answers_once_the_high_watermark_covers_the_batch(broker, admin) -> None:
    """Under log.flush.policy=always the high watermark is the fsynced offset; a one-replica
    Kafka has moved it by the time it answers acks=1, so onceflow answers acks=1 after the
    fsync too (the power-loss promise stays: nothing visible is ever taken back)."""
    topic = new_topic(broker.bootstrap, "fidelity")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0})
    acknowledged: list[int] = []
    behind = []
    for attempt in range(30):
        producer.produce(
            topic,
            value=bytes(200_000),
            on_delivery=lambda err, msg: acknowledged.append(msg.offset()),
        )
        producer.flush(10)
        latest = list_offset(admin, topic, OffsetSpec.latest())[0]
        if latest <= acknowledged[-1]:
            behind.append((attempt, acknowledged[-1], latest))
    assert behind == []


# -- ListOffsets v0 ---------------------------------------------------------------------


def test_list_offsets_v0_for_clients_of_old_brokers(broker, admin) -> None:
    """kafka-python told it talks to Kafka 0.10.0 sends ListOffsets v0, as Burrow does."""
    topic = new_topic(broker.bootstrap, "fidelity", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for index in range(5):
        producer.produce(topic, value=b"x", partition=index % 2)
    assert producer.flush(10) == 0
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0))
    try:
        partitions = [KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)]
        assert consumer.end_offsets(partitions) == {partitions[0]: 3, partitions[1]: 2}
        assert consumer.beginning_offsets(partitions) == {partitions[0]: 0, partitions[1]: 0}
    finally:
        consumer.close()
    request = ListOffsetsRequestV0(
        replica_id=i32(-1),
        topics=(
            ListOffsetsTopicV0(
                name=topic,
                partitions=(
                    ListOffsetsPartitionV0(
                        partition_index=i32(0), timestamp=i64(-1), max_num_offsets=i32(5)
                    ),
                    ListOffsetsPartitionV0(partition_index=i32(7), timestamp=i64(-1)),
                ),
            ),
        ),
    )
    with WireClient(broker.bootstrap) as client:
        response = client.request(request)
    found, missing = response.topics[0].partitions
    assert (found.error_code, found.old_style_offsets) == (0, (3, 0))
    assert missing.error_code == KafkaError.UNKNOWN_TOPIC_OR_PART
