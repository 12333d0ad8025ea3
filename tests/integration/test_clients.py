"""Real, unmodified clients against a real broker process.

confluent-kafka (librdkafka): idempotent producer, consumer in assign mode, AdminClient.
kafka-python and aiokafka: produce and consume in assign mode. kcat: metadata, produce,
consume. Ordering within a partition and key -> partition placement are asserted.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
import zlib
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from onceflow.testing import PluginBroker
from tests.kit.clients import consume, create_topic

TIMEOUT = 15


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin_for(broker: PluginBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def idempotent_producer(broker: PluginBroker, **extra) -> Producer:
    return Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            **extra,
        }
    )


def consume_assigned(broker: PluginBroker, topic: str, partitions: int, expected: int) -> list:
    return consume(
        broker.bootstrap,
        topic,
        expected,
        partitions=range(partitions),
        timeout=TIMEOUT,
        strict=True,
    )


def assert_partition_order(records: list[tuple[int, int, bytes, bytes]]) -> None:
    """records: (partition, offset, key, value) in consumption order; values are ints."""
    offsets: dict[int, list[int]] = {}
    last_value: dict[bytes, int] = {}
    partition_of_key: dict[bytes, int] = {}
    for partition, offset, key, value in records:
        offsets.setdefault(partition, []).append(offset)
        assert partition_of_key.setdefault(key, partition) == partition, "key moved partition"
        number = int(value)
        assert number > last_value.get(key, -1), f"per-key order broken for {key!r}"
        last_value[key] = number
    for partition, seen in offsets.items():
        assert seen == list(range(seen[0], seen[0] + len(seen))), f"gap/reorder in {partition}"


# -- confluent-kafka ---------------------------------------------------------------------


def test_confluent_idempotent_producer_and_assign_consumer(broker):
    topic = unique("orders")
    create_topic(broker.bootstrap, topic, 3)
    producer = idempotent_producer(broker)
    reports = []

    def on_delivery(error, message):
        reports.append((error, message.partition(), message.offset(), message.key()))

    for number in range(2000):
        key = f"customer-{number % 23}".encode()
        producer.produce(topic, key=key, value=str(number).encode(), on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert all(error is None for error, *_ in reports)

    messages = consume_assigned(broker, topic, 3, 2000)
    assert len(messages) == 2000
    records = [(m.partition(), m.offset(), m.key(), m.value()) for m in messages]
    assert_partition_order(records)
    for partition in range(3):
        offsets = [offset for p, offset, *_ in records if p == partition]
        assert offsets == list(range(len(offsets)))  # dense from 0
    # librdkafka's default partitioner (consistent_random) places keyed records by
    # CRC-32 of the key: placement is a function of the key alone, stable across runs.
    for partition, _, key, _ in records:
        assert partition == zlib.crc32(key) % 3
    delivered = {(p, o) for _, p, o, _ in reports}
    assert delivered == {(p, o) for p, o, *_ in records}


def test_confluent_key_placement_is_stable_across_producers(broker):
    topic = unique("stable")
    create_topic(broker.bootstrap, topic, 5)
    keys = [f"key-{n}".encode() for n in range(40)]
    placements = []
    for _run in range(2):  # two independent producer instances ("runs")
        producer = idempotent_producer(broker)
        placed: dict[bytes, int] = {}

        def remember(error, message, placed=placed):
            assert error is None
            placed[message.key()] = message.partition()

        for key in keys:
            producer.produce(topic, key=key, value=b"x", on_delivery=remember)
        assert producer.flush(TIMEOUT) == 0
        placements.append(placed)
    assert placements[0] == placements[1]
    assert len(set(placements[0].values())) > 1


def test_confluent_watermarks_and_offsets_for_times(broker):
    topic = unique("times")
    create_topic(broker.bootstrap, topic, 1)
    producer = idempotent_producer(broker, **{"linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for number in range(10):
        producer.produce(topic, value=str(number).encode(), timestamp=base + number * 1000)
        producer.flush(TIMEOUT)  # one batch per record: by-time lookups are exact
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("t")})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (0, 10)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], TIMEOUT)
    assert found[0].offset == 5
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99_999_999)], TIMEOUT)
    assert found[0].offset == -1  # nothing that late: the end (librdkafka's OFFSET_END)
    consumer.close()


def test_admin_topics_partitions_and_cluster(broker):
    admin = admin_for(broker)
    name = unique("admin")
    futures = admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "123456"})])
    futures[name].result(TIMEOUT)
    assert name in admin.list_topics(timeout=TIMEOUT).topics
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 2

    # Already exists; replication factor 3; bad name; unknown config; validate_only.
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    other = unique("rf")
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([NewTopic(other, 1, 3)])[other].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([NewTopic(other, 1, 1, config={"no.such.config": "1"})])[other].result(
            TIMEOUT
        )
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG
    admin.create_topics([NewTopic(other, 1, 1)], validate_only=True)[other].result(TIMEOUT)
    assert other not in admin.list_topics(timeout=TIMEOUT).topics

    admin.create_partitions([NewPartitions(name, 4)])[name].result(TIMEOUT)
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 4
    with pytest.raises(KafkaException) as failure:
        admin.create_partitions([NewPartitions(name, 3)])[name].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [node.id for node in cluster.nodes] == [0]
    assert cluster.controller.id == 0 and cluster.cluster_id

    admin.delete_topics([name], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while name in admin.list_topics(timeout=TIMEOUT).topics and time.monotonic() < deadline:
        time.sleep(0.05)
    assert name not in admin.list_topics(timeout=TIMEOUT).topics
    with pytest.raises(KafkaException) as failure:
        admin.delete_topics([name], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def test_admin_describe_alter_and_incremental_alter_configs(broker):
    admin = admin_for(broker)
    name = unique("configs")
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "60000"})])[name].result(
        TIMEOUT
    )
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "60000"
    assert (
        configs["retention.ms"].source == ConfigResource.Type.TOPIC.value
        or not configs["retention.ms"].is_default
    )
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default

    # AlterConfigs replaces the whole set of overrides.
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, {"segment.bytes": "1048576"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, name)
    assert configs["segment.bytes"].value == "1048576"
    assert configs["retention.ms"].is_default

    # IncrementalAlterConfigs: set, append to a list, delete.
    changes = ConfigResource(
        ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([changes])[changes].result(TIMEOUT)
    configs = topic_configs(admin, name)
    assert configs["retention.bytes"].value == "1000000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.bytes"].is_default

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("no.such.thing", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as failure:
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG
    bad_value = ConfigResource(ConfigResource.Type.TOPIC, name, {"retention.ms": "soon"})
    with pytest.raises(KafkaException) as failure:
        admin.alter_configs([bad_value])[bad_value].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert topic_configs(admin, name)["retention.bytes"].value == "1000000"  # unchanged

    missing = ConfigResource(ConfigResource.Type.TOPIC, unique("missing"))
    with pytest.raises(KafkaException) as failure:
        admin.describe_configs([missing])[missing].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(TIMEOUT)
    assert broker_configs["log.flush.policy"].value == "always"


def test_admin_delete_records_and_list_offsets(broker):
    admin = admin_for(broker)
    name = unique("delrec")
    create_topic(broker.bootstrap, name, 1)
    producer = idempotent_producer(broker, **{"linger.ms": 0})
    base = int(time.time() * 1000) - 50_000
    for number in range(10):  # one record per batch: by-timestamp lookups are exact
        producer.produce(name, value=str(number).encode(), timestamp=base + number * 100)
        assert producer.flush(TIMEOUT) == 0
    batched = idempotent_producer(broker, **{"linger.ms": 200})
    for number in range(10, 20):  # most likely one batch
        batched.produce(name, value=str(number).encode(), timestamp=base + number * 100)
    assert batched.flush(TIMEOUT) == 0
    partition = TopicPartition(name, 0)

    def list_offset(spec: OffsetSpec) -> int:
        return admin.list_offsets({partition: spec})[partition].result(TIMEOUT).offset

    assert list_offset(OffsetSpec.earliest()) == 0
    assert list_offset(OffsetSpec.latest()) == 20
    assert list_offset(OffsetSpec.for_timestamp(base + 450)) == 5
    assert list_offset(OffsetSpec.for_timestamp(base)) == 0
    assert list_offset(OffsetSpec.for_timestamp(base + 10**9)) == -1
    # Inside a multi-record batch the answer is the batch's base offset (documented).
    assert 10 <= list_offset(OffsetSpec.for_timestamp(base + 1500)) <= 15

    result = admin.delete_records([TopicPartition(name, 0, 7)])
    deleted = next(iter(result.values())).result(TIMEOUT)
    assert deleted.low_watermark == 7
    assert list_offset(OffsetSpec.earliest()) == 7
    messages = consume_assigned(broker, name, 1, 13)
    assert [m.offset() for m in messages] == list(range(7, 20))

    # Delete into the middle of the (likely) multi-record batch: records before the low
    # watermark are not delivered even though their batch still is.
    result = admin.delete_records([TopicPartition(name, 0, 13)])
    assert next(iter(result.values())).result(TIMEOUT).low_watermark == 13
    messages = consume_assigned(broker, name, 1, 7)
    assert [int(m.value()) for m in messages] == list(range(13, 20))

    beyond = TopicPartition(name, 0, 999)
    with pytest.raises(KafkaException) as failure:
        admin.delete_records([beyond])[beyond].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_produce_to_unknown_topic_is_auto_created_by_metadata(broker):
    name = unique("auto")
    producer = idempotent_producer(broker)
    producer.produce(name, value=b"hello")
    assert producer.flush(TIMEOUT) == 0
    messages = consume_assigned(broker, name, 1, 1)
    assert [m.value() for m in messages] == [b"hello"]


# -- kafka-python --------------------------------------------------------------------------


def test_kafka_python_produce_and_assign_consume(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = unique("kpy")
    create_topic(broker.bootstrap, topic, 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=2)
    futures = [
        producer.send(topic, key=f"k{n % 7}".encode(), value=str(n).encode()) for n in range(600)
    ]
    producer.flush(TIMEOUT)
    metadata = [future.get(TIMEOUT) for future in futures]
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None
    )
    consumer.assign([KTopicPartition(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    records = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < 600 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records += [(r.partition, r.offset, r.key, r.value) for r in batch]
    consumer.close()
    assert len(records) == 600
    assert_partition_order(records)
    assert {(m.partition, m.offset) for m in metadata} == {(p, o) for p, o, *_ in records}


def test_kafka_python_aiokafka_and_librdkafka_murmur2_agree(broker):
    """Java-compatible murmur2 placement is the same from all three clients."""
    from kafka import KafkaProducer

    topic = unique("murmur")
    create_topic(broker.bootstrap, topic, 6)
    keys = [f"user-{n}".encode() for n in range(30)]

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    kafka_python = {k: producer.send(topic, key=k, value=b"1").get(TIMEOUT).partition for k in keys}
    producer.close()

    async def with_aiokafka() -> dict[bytes, int]:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            return {k: (await producer.send_and_wait(topic, b"2", key=k)).partition for k in keys}
        finally:
            await producer.stop()

    aiokafka = asyncio.run(with_aiokafka())
    rdkafka = idempotent_producer(broker, partitioner="murmur2_random")
    librdkafka: dict[bytes, int] = {}
    for key in keys:
        rdkafka.produce(
            topic,
            key=key,
            value=b"3",
            on_delivery=lambda e, m: librdkafka.__setitem__(m.key(), m.partition()),
        )
    assert rdkafka.flush(TIMEOUT) == 0
    assert kafka_python == aiokafka == librdkafka
    assert len(set(kafka_python.values())) > 1


# -- aiokafka ------------------------------------------------------------------------------


def test_aiokafka_idempotent_produce_and_assign_consume(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic = unique("aio")
    create_topic(broker.bootstrap, topic, 2)

    async def run() -> list:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=2
        )
        await producer.start()
        try:
            sends = [
                await producer.send(topic, str(n).encode(), key=f"k{n % 5}".encode())
                for n in range(500)
            ]
            results = await asyncio.gather(*sends)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None
        )
        await consumer.start()
        try:
            consumer.assign([ATopicPartition(topic, p) for p in range(2)])
            await consumer.seek_to_beginning()
            records = []
            deadline = time.monotonic() + TIMEOUT
            while len(records) < 500 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for batch in batches.values():
                    records += [(r.partition, r.offset, r.key, r.value) for r in batch]
        finally:
            await consumer.stop()
        return results, records

    results, records = asyncio.run(run())
    assert len(records) == 500
    assert_partition_order(records)
    assert {(r.partition, r.offset) for r in results} == {(p, o) for p, o, *_ in records}


# -- kcat ----------------------------------------------------------------------------------

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")


def kcat(broker: PluginBroker, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [KCAT, "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@needs_kcat
def test_kcat_metadata_produce_consume(broker, tmp_path: Path):
    topic = unique("kcat")
    create_topic(broker.bootstrap, topic, 2)
    listing = json.loads(kcat(broker, "-L", "-J", "-t", topic))
    assert [b["id"] for b in listing["brokers"]] == [0]
    (described,) = listing["topics"]
    assert described["topic"] == topic and len(described["partitions"]) == 2
    assert "ready" not in kcat(broker, "-L")  # plain text form works too

    lines = "".join(f"k{n % 4}:{n}\n" for n in range(100))
    kcat(broker, "-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true", stdin=lines)
    output = kcat(
        broker, "-C", "-t", topic, "-e", "-o", "beginning", "-J", "-X", "fetch.wait.max.ms=50"
    )
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert len(records) == 100
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    assert_partition_order(
        [(r["partition"], r["offset"], r["key"].encode(), r["payload"]) for r in records]
    )
    for record in records:  # kcat is librdkafka: consistent_random placement
        assert record["partition"] == zlib.crc32(record["key"].encode()) % 2

    # Produce to one explicit partition, then consume just that partition.
    kcat(broker, "-P", "-t", topic, "-p", "1", stdin="x\ny\nz\n")
    output = kcat(broker, "-C", "-t", topic, "-p", "1", "-o", "-3", "-e", "-f", "%o:%s\n")
    tail = [line.split(":", 1) for line in output.splitlines()]
    assert [value for _, value in tail] == ["x", "y", "z"]
    offsets = [int(offset) for offset, _ in tail]
    assert offsets == list(range(offsets[0], offsets[0] + 3))
