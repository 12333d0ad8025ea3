"""commitOffsetsToGroup: the query's progress shows up in a consumer group (for lag tools)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.spark.conftest import ENGINES, create_topic, produce, wait_until

pytestmark = [pytest.mark.spark]


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        result = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return [tp.offset for tp in result]
    finally:
        consumer.close()


def _group_query(spark, bootstrap, topic, group, checkpoint):
    return (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.group.id", group)
        .option("commitOffsetsToGroup", "true")
        .option("maxOffsetsPerTrigger", "4")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
    )


def test_running_query_commits_its_last_batch_within_a_trigger(
    spark, kafka_broker, topic, tmp_path
):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"x"] * 3, partition=0)
    produce(bootstrap, topic, [b"y"] * 2, partition=1)
    group = "lag-" + topic
    query = _group_query(spark, bootstrap, topic, group, tmp_path / "cp")
    query = query.trigger(processingTime="200 milliseconds").start()
    try:
        query.processAllAvailable()
        # No new data arrives, yet the group reaches the log end (no lag) by the next trigger.
        wait_until(lambda: committed(bootstrap, group, topic, 2) == [3, 2], timeout=30)
    finally:
        query.stop()


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_available_now_query_leaves_no_lag(spark, engine, topic, tmp_path):
    bootstrap = engine.bootstrap
    create_topic(bootstrap, topic, partitions=3)
    for partition in range(3):
        produce(bootstrap, topic, [b"v"] * 5, partition=partition)
    group = "lag-" + topic
    query = _group_query(spark, bootstrap, topic, group, tmp_path / "cp")
    query = query.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    assert query.lastProgress is not None and query.lastProgress["batchId"] >= 3
    # Four batches of at most four records; the group has the last one's end offsets.
    assert committed(bootstrap, group, topic, 3) == [5, 5, 5]
