"""commitOffsetsToGroup: the query's progress shows up in a consumer group (for lag tools)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from onceflow.protocol.client import WireClient
from tests.spark.conftest import create_topic, produce, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10


def group_offsets_supported(bootstrap: str) -> bool:
    with WireClient(bootstrap) as wire:
        response = wire.request(
            ApiVersionsRequest, client_software_name="probe", client_software_version="0"
        )
    keys = {api.api_key for api in response.api_keys}
    return {OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR} <= keys


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        result = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return [tp.offset for tp in result]
    finally:
        consumer.close()


def test_commit_offsets_to_group_one_batch_late(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    if not group_offsets_supported(bootstrap):
        pytest.skip("broker does not advertise OffsetCommit/OffsetFetch/FindCoordinator yet")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"x"] * 3, partition=0)
    produce(bootstrap, topic, [b"y"] * 2, partition=1)
    group = "lag-" + topic
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.group.id", group)
        .option("commitOffsetsToGroup", "true")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        # Spark commits a batch's source offsets when it plans the next batch (one batch
        # late), so new data makes the first batch's end offsets ({0: 3, 1: 2}) appear.
        produce(bootstrap, topic, [b"z"], partition=1)
        wait_until(lambda: committed(bootstrap, group, topic, 2) in ([3, 2], [3, 3]), timeout=60)
    finally:
        query.stop()
