"""Places where the broker answered differently from Apache Kafka 3.9, each checked with a
real client (confluent-kafka, kafka-python) or, where no client exposes the detail, with
the exact request over the wire. One broker serves the whole module."""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
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
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i8, i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
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


def group_members(admin: AdminClient, group: str) -> set[str]:
    """The group instance ids of the group's members."""
    description = admin.describe_consumer_groups([group])[group].result(10)
    return {member.group_instance_id for member in description.members}


class StaticMember:
    """A static member of a classic group driven over the wire, so that the moment of its
    last heartbeat is known exactly (a real consumer's last heartbeat before ``close()``
    came 0.45 s early on a loaded machine, and the test's reference with it)."""

    def __init__(self, bootstrap: str, group: str, topic: str, index: int, session_s: float):
        self.client = WireClient(bootstrap)
        self.group, self.topic = group, topic
        self.instance = f"instance-{index}"
        self.session_s = session_s
        self.member_id = ""
        self.generation = -1
        self.last_heartbeat: tuple[float, float] = (0.0, 0.0)  # sent, answered

    def join(self) -> JoinGroupResponse:
        name = self.topic.encode()
        subscription = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)
        joined = self.client.request(
            JoinGroupRequest,
            group_id=self.group,
            session_timeout=datetime.timedelta(seconds=self.session_s),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id="",
            group_instance_id=self.instance,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription),),
            reason=None,
        )
        assert joined.error_code == ErrorCode.none, joined
        self.member_id, self.generation = joined.member_id, joined.generation_id
        return joined

    def sync(self, members: tuple[str, ...]) -> None:
        synced = self.client.request(
            SyncGroupRequest,
            group_id=self.group,
            generation_id=i32(self.generation),
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type="consumer",
            protocol_name="range",
            assignments=tuple(
                SyncGroupRequestAssignment(member_id=m, assignment=b"") for m in members
            ),
        )
        assert synced.error_code == ErrorCode.none, synced

    def heartbeat(self) -> None:
        sent = time.monotonic()
        answer = self.client.request(
            HeartbeatRequest,
            group_id=self.group,
            generation_id=i32(self.generation),
            member_id=self.member_id,
            group_instance_id=self.instance,
        )
        assert answer.error_code == ErrorCode.none, answer
        self.last_heartbeat = (sent, time.monotonic())


def test_static_members_expire_after_their_own_session_timeout(kafka_broker_factory) -> None:
    """Three static members with session timeouts of 2, 3 and 4 s stop heartbeating at
    once: each leaves the group no sooner than its own timeout after its last heartbeat,
    and within a second of it (a group-wide timeout would drop all three together)."""
    # All three joins land in the first generation: the first waits for the others.
    broker = kafka_broker_factory(
        config={"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "1000"}
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    topic = new_topic(broker.bootstrap, "fidelity", partitions=3)
    group = f"static-{uuid.uuid4().hex[:8]}"
    members = [
        StaticMember(broker.bootstrap, group, topic, index, session_s)
        for index, session_s in enumerate((2.0, 3.0, 4.0))
    ]
    with ThreadPoolExecutor(len(members)) as pool:
        joined = list(pool.map(StaticMember.join, members))
        leader = joined[0].leader
        assert {answer.generation_id for answer in joined} == {joined[0].generation_id}
        assert {answer.leader for answer in joined} == {leader}
        ids = tuple(member.member_id for member in members)
        list(pool.map(lambda m: m.sync(ids if m.member_id == leader else ()), members))
    for _ in range(5):
        for member in members:
            member.heartbeat()
        time.sleep(0.1)
    assert group_members(admin, group) == {member.instance for member in members}

    gone: dict[str, float] = {}
    deadline = time.monotonic() + 10
    while len(gone) < len(members):
        assert time.monotonic() < deadline, f"still in the group: {group_members(admin, group)}"
        present = group_members(admin, group)
        seen_at = time.monotonic()
        for member in members:
            if member.instance not in present:
                gone.setdefault(member.instance, seen_at)
        time.sleep(0.05)
    for member in members:
        sent, answered = member.last_heartbeat
        after = gone[member.instance] - sent
        assert member.session_s <= after, (member.instance, after)
        assert gone[member.instance] - answered <= member.session_s + 1.0, (member.instance, after)
    for member in members:
        member.client.close()
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
