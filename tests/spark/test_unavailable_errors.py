"""A query whose Kafka cluster stays away longer than ``unavailableTimeoutMs`` fails with
one line, not a Python traceback inside Spark's error (issue 33, item 8).

Riding through shorter outages is shown on Apache Kafka's cluster
(tests/apache_kafka/test_spark_outages.py, tests/apache_kafka/test_orders_demo.py); here
the only broker is SIGKILLed under a running query, and the query's next ``latestOffset``
cannot reach any broker.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from tests.spark.conftest import create_topic, produce

pytestmark = [pytest.mark.spark]


def test_cluster_gone_for_longer_than_the_timeout_fails_the_query_with_one_line(
    spark, kafka_broker_process, topic, tmp_path
):
    bootstrap = kafka_broker_process.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"a", b"b"], partition=0)
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("unavailableTimeoutMs", "3000")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        kafka_broker_process.kill()
        with pytest.raises(StreamingQueryException) as raised:
            query.awaitTermination(300)
    finally:
        query.stop()
    text = str(raised.value)
    assert "Traceback" not in text, text
    line = next(line for line in text.splitlines() if "KafkaUnavailableError" in line)
    assert f"metadata of {bootstrap}: still unavailable after " in line, text
    assert "'unavailableTimeoutMs' (3000 ms)" in line, text
