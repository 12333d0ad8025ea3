"""Batch reads: spark.read.format("onceflow") with startingOffsets/endingOffsets."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from onceflow.spark.kafka_source.schema import spark_schema
from tests.spark.conftest import create_topic, produce

pytestmark = [pytest.mark.spark]

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)


def batch(spark, bootstrap: str, **options: str):
    reader = spark.read.format("onceflow").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_schema_is_spark_kafka_connector_schema(spark, kafka_broker, topic):
    create_topic(kafka_broker.bootstrap, topic)
    df = batch(spark, kafka_broker.bootstrap, subscribe=topic)
    assert df.schema == spark.createDataFrame([], KAFKA_SCHEMA).schema
    assert df.schema == spark_schema(False)
    with_headers = batch(spark, kafka_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert (
        with_headers.schema
        == spark.createDataFrame(
            [], KAFKA_SCHEMA + ", headers array<struct<key:string,value:binary>>"
        ).schema
    )


def test_batch_read_all_columns(spark, kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    before = time.time()
    produce(
        bootstrap,
        topic,
        [b"a0", b"a1", b"a2"],
        partition=0,
        key=b"k",
        headers=[("h1", b"v1"), ("h2", None)],
    )
    produce(bootstrap, topic, [b"b0", b"b1"], partition=1)
    rows = (
        batch(spark, bootstrap, subscribe=topic, includeHeaders="true")
        .orderBy("partition", "offset")
        .collect()
    )
    assert [(r.partition, r.offset, r.value) for r in rows] == [
        (0, 0, b"a0"),
        (0, 1, b"a1"),
        (0, 2, b"a2"),
        (1, 0, b"b0"),
        (1, 1, b"b1"),
    ]
    first = rows[0]
    assert first.key == b"k" and first.topic == topic
    assert first.timestampType == 0  # CreateTime
    assert abs(first.timestamp.timestamp() - before) < 60
    assert [(h.key, h.value) for h in first.headers] == [("h1", b"v1"), ("h2", None)]
    assert rows[3].key is None and rows[3].headers == []


def test_batch_starting_and_ending_offsets(spark, kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=0)
    produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=1)
    df = batch(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 7, "1": -1}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    # assign + minPartitions splits one range into several tasks; nothing lost or doubled
    df = batch(
        spark,
        bootstrap,
        assign=json.dumps({topic: [1]}),
        minPartitions="4",
        endingOffsets=json.dumps({topic: {"1": 9}}),
    )
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in df.collect()) == list(range(9))


def test_batch_subscribe_pattern(spark, kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic + "-a")
    create_topic(bootstrap, topic + "-b")
    create_topic(bootstrap, "other-" + topic)
    for name in (topic + "-a", topic + "-b", "other-" + topic):
        produce(bootstrap, name, [name.encode()])
    df = batch(spark, bootstrap, subscribePattern=topic + "-.*")
    assert sorted(r.topic for r in df.collect()) == [topic + "-a", topic + "-b"]


def test_fail_on_data_loss_after_delete_records(spark, kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 5)]).values():
        future.result(15)
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        batch(spark, bootstrap, subscribe=topic, startingOffsets=from_zero).collect()
    df = batch(spark, bootstrap, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert sorted(r.offset for r in df.collect()) == [5, 6, 7, 8, 9]
    # "earliest" starts at the new log start: no data loss
    assert batch(spark, bootstrap, subscribe=topic).count() == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"),
        ({"subscribe": "x", "assign": '{"x":[0]}'}, "exactly one of the options"),
        ({"subscribe": "x", "startingOffsets": "latest"}, "latest"),
        ({"subscribe": "x", "endingOffsets": "{bad"}, "endingOffsets"),
        ({"subscribe": "x", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"subscribe": "x", "maxOffsetsPerTrigger": "10"}, "only for streaming"),
        ({"subscribe": "x", "startingOfsets": "earliest"}, "unknown option 'startingofsets'"),
    ],
)
def test_bad_options_fail_with_clear_message(spark, options, message):
    reader = spark.read.format("onceflow").option("kafka.bootstrap.servers", "127.0.0.1:1")
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        reader.load().collect()
