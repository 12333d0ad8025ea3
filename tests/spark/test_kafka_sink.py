"""The onceflow-kafka sink in the shared SparkSession: exactly-once output, replays, murmur2."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kafka.partitioner.default import murmur2

from onceflow.verify.run import run_verify
from tests.spark.conftest import create_topic
from tests.spark.sink_helpers import confirmation_records, make_orders, orders_stream
from tests.spark.test_database_sink import forget_commit

pytestmark = [pytest.mark.spark]


def run_confirmations(spark, bootstrap, topic, out, checkpoint, sink_id):
    query = (
        confirmation_records(orders_stream(spark, bootstrap, topic, maxOffsetsPerTrigger=40))
        .writeStream.format("onceflow-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("sinkId", sink_id)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, eof = [], set()
    while len(eof) < partitions:
        message = consumer.poll(5)
        assert message is not None, "timed out reading the output"
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF
            eof.add(message.partition())
            continue
        records.append((message.partition(), message.key()))
    consumer.close()
    return records


def test_kafka_sink_exactly_once_with_replayed_batch(spark, txn_broker, topic, tmp_path):
    bootstrap = txn_broker.bootstrap
    out = f"{topic}-out"
    create_topic(bootstrap, out, partitions=3)
    make_orders(bootstrap, topic, 120)
    checkpoint = tmp_path / "cp"
    run_confirmations(spark, bootstrap, topic, out, checkpoint, f"{topic}-sink")

    # Run the last batch again (Spark forgot its commit): its tasks find their markers.
    batches = sorted(int(n.name) for n in (checkpoint / "commits").iterdir() if n.name.isdigit())
    assert len(batches) >= 3
    forget_commit(checkpoint, batches[-1])
    run_confirmations(spark, bootstrap, topic, out, checkpoint, f"{topic}-sink")

    report = run_verify(
        bootstrap, topic, id_field="order_id", key_field="store", output_topic=out, timeout=30
    )
    assert report.ok, report.to_json()
    assert report.sinks[0].records == 120
    # Keys are placed like Kafka's Java partitioner places them (kafka-python's copy of it).
    for partition, key in read_committed(bootstrap, out, 3):
        assert partition == (murmur2(key) & 0x7FFFFFFF) % 3


def test_kafka_sink_new_checkpoint_same_sink_id_fails(spark, txn_broker, topic, tmp_path):
    bootstrap = txn_broker.bootstrap
    out = f"{topic}-out"
    create_topic(bootstrap, out, partitions=1)
    make_orders(bootstrap, topic, 10)
    run_confirmations(spark, bootstrap, topic, out, tmp_path / "cp", f"{topic}-sink")
    with pytest.raises(Exception, match="was last written by streaming query"):
        run_confirmations(spark, bootstrap, topic, out, tmp_path / "cp2", f"{topic}-sink")
