"""An onceflow-kafka sink that writes to a topic its own query reads gets a warning."""

from __future__ import annotations

import logging

import pytest

from tests.spark.conftest import create_topic, produce, wait_until

pytestmark = [pytest.mark.spark]


def start_copy(spark, bootstrap, source, target, checkpoint):
    return (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", f"{source}.*")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("onceflow-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("sinkId", f"copy-{target}")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def test_sink_writing_to_its_own_source_topic_is_warned(spark, txn_broker, topic, tmp_path, caplog):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic)
    create_topic(bootstrap, f"{topic}-elsewhere")
    produce(bootstrap, topic, [b"a"])
    caplog.set_level(logging.WARNING, logger="onceflow.spark.feedback")
    loop = start_copy(spark, bootstrap, topic, topic, tmp_path / "loop")
    try:
        assert wait_until(
            lambda: any("also reads" in r.getMessage() for r in caplog.records), timeout=90
        )
    finally:
        loop.stop()
    (warning,) = [r.getMessage() for r in caplog.records if "also reads" in r.getMessage()]
    assert f"writes to topic '{topic}'" in warning


def test_sink_writing_elsewhere_is_not_warned(spark, txn_broker, topic, tmp_path, caplog):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic)
    create_topic(bootstrap, f"out-{topic}")
    produce(bootstrap, topic, [b"a"])
    caplog.set_level(logging.DEBUG, logger="onceflow.spark.feedback")
    query = start_copy(spark, bootstrap, topic, f"out-{topic}", tmp_path / "copy")
    try:
        query.processAllAvailable()
        wait_until(lambda: query.lastProgress is not None, timeout=30)
    finally:
        query.stop()
    assert not [r for r in caplog.records if "also reads" in r.getMessage()]
    assert not [r for r in caplog.records if "skipped" in r.getMessage()]
