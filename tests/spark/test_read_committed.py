"""read_committed vs read_uncommitted through Spark, with real transactions on the broker."""

from __future__ import annotations

import pytest

from tests.spark.conftest import create_topic, produce, transactional_producer, wait_until
from tests.spark.wire_txn import WireTransactions

pytestmark = [pytest.mark.spark]


def values(spark, bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    df = (
        spark.read.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .load()
    )
    return [r.value for r in df.orderBy("offset").collect()]


def test_stream_reads_committed_data_only_and_waits_for_open_transactions(
    spark, kafka_broker, topic, tmp_path
):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    committed = WireTransactions(bootstrap)
    committed.send(topic, 0, [b"c1", b"c2"])
    committed.send(topic, 1, [b"c3"])
    committed.end(commit=True)
    aborted = WireTransactions(bootstrap)
    aborted.send(topic, 0, [b"a1", b"a2"])
    aborted.end(commit=False)
    aborted.close()
    open_txn = committed  # a second transaction, left open for now
    open_txn.send(topic, 1, [b"o1"])
    produce(bootstrap, topic, [b"p1"], partition=1)  # after the open transaction

    seen: list[bytes] = []
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(lambda df, _id: seen.extend(r.value for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(lambda: len(seen) >= 3)
        query.processAllAvailable()
        assert sorted(seen) == [b"c1", b"c2", b"c3"]  # p1 waits behind the open txn
        open_txn.end(commit=True)
        wait_until(lambda: len(seen) >= 5)
        query.processAllAvailable()
        assert sorted(seen) == [b"c1", b"c2", b"c3", b"o1", b"p1"]
    finally:
        query.stop()
        open_txn.close()
    assert query.exception() is None

    assert sorted(values(spark, bootstrap, topic, "read_committed")) == sorted(seen)
    assert sorted(values(spark, bootstrap, topic, "read_uncommitted")) == sorted(
        [*seen, b"a1", b"a2"]
    )


def test_confluent_kafka_transactions_end_to_end(spark, txn_broker, topic):
    """Same guarantee with librdkafka's transactional producer (needs FindCoordinator)."""
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic)
    producer = transactional_producer(bootstrap)
    for commit in (True, False, True):
        producer.begin_transaction()
        producer.produce(topic, value=b"commit" if commit else b"abort", partition=0)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.flush(10)  # abort_transaction() purges records not yet sent
            producer.abort_transaction(10)
    assert values(spark, bootstrap, topic, "read_committed") == [b"commit", b"commit"]
    assert values(spark, bootstrap, topic, "read_uncommitted") == [
        b"commit",
        b"abort",
        b"commit",
    ]
