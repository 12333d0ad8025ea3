"""Streaming reads: spark.readStream.format("onceflow")."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from tests.spark.conftest import add_partitions, create_topic, produce, wait_until

pytestmark = [pytest.mark.spark]


def stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("onceflow").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_of(spark, name: str) -> list[tuple[int, int, bytes]]:
    return sorted(
        (r.partition, r.offset, r.value)
        for r in spark.sql(f"SELECT partition, offset, value FROM {name}").collect()
    )


def batch_sizes(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_respects_max_offsets_per_trigger(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"p0-%d" % i for i in range(15)], partition=0)
    produce(bootstrap, topic, [b"p1-%d" % i for i in range(10)], partition=1)
    seen: list[int] = []

    def record(df, batch_id):
        seen.append(df.count())
        if batch_id == 0:  # data that arrives after the query started is not read
            produce(bootstrap, topic, [b"late-%d" % i for i in range(5)], partition=0)

    df = stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10"
    )
    query = (
        df.writeStream.foreachBatch(record)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert seen == [10, 10, 5]

    # A second AvailableNow run on the same checkpoint reads exactly the late records.
    out = []
    query = (
        stream(spark, bootstrap, subscribe=topic, maxOffsetsPerTrigger="10")
        .writeStream.foreachBatch(lambda df, _id: out.extend(r.value for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(out) == [b"late-%d" % i for i in range(5)]


def test_stream_picks_up_new_partitions_and_resumes_from_checkpoint(
    spark, kafka_broker, topic, tmp_path
):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, [b"a", b"b", b"c"], partition=0)
    checkpoint = str(tmp_path / "cp")
    seen: list[tuple[int, int, bytes]] = []

    def collect(df, _batch_id):
        seen.extend((r.partition, r.offset, r.value) for r in df.collect())

    def start():
        return (
            stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    try:
        wait_until(lambda: len(seen) == 3)
        add_partitions(bootstrap, topic, 3)
        produce(bootstrap, topic, [b"d"], partition=1)
        produce(bootstrap, topic, [b"e", b"f"], partition=2)
        wait_until(lambda: len(seen) == 6)
        # foreachBatch is at-least-once: a batch whose commit Spark has not yet logged
        # when the query stops runs again after the restart. Let it log the commit.
        query.processAllAvailable()
        assert sorted(seen) == [
            (0, 0, b"a"),
            (0, 1, b"b"),
            (0, 2, b"c"),
            (1, 0, b"d"),
            (2, 0, b"e"),
            (2, 1, b"f"),
        ]
    finally:
        query.stop()
    assert query.exception() is None

    # Restart from the checkpoint: only new records, none twice.
    seen.clear()
    produce(bootstrap, topic, [b"g"], partition=1)
    query = start()
    try:
        wait_until(lambda: len(seen) >= 1)
        query.processAllAvailable()
        assert seen == [(1, 1, b"g")]
    finally:
        query.stop()


def test_stream_starting_offsets_latest_and_json(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"old"] * 4, partition=0)
    produce(bootstrap, topic, [b"old"] * 4, partition=1)
    name = "q_" + uuid.uuid4().hex[:8]
    query = (
        stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets=json.dumps({topic: {"0": 2, "1": -1}}),
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        produce(bootstrap, topic, [b"new"], partition=1)
        wait_until(lambda: len(rows_of(spark, name)) == 3)
        assert rows_of(spark, name) == [(0, 2, b"old"), (0, 3, b"old"), (1, 4, b"new")]
    finally:
        query.stop()


def test_deleted_topic_fails_the_query_when_fail_on_data_loss(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"x"], partition=0)
    name = "q_" + uuid.uuid4().hex[:8]
    query = (
        stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(lambda: len(rows_of(spark, name)) == 1)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(15)
        with pytest.raises(Exception, match="failOnDataLoss") as failure:
            query.awaitTermination(60)
        assert f"Partition {topic}-0 is gone" in str(failure.value)
    finally:
        query.stop()


def test_stream_bad_option_fails_at_start(spark):
    with pytest.raises(Exception, match="only for batch queries"):
        stream(spark, "127.0.0.1:1", subscribe="x", endingOffsets="latest").writeStream.format(
            "memory"
        ).queryName("never").start().awaitTermination(30)
