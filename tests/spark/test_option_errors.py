"""Bad source options fail at ``load()`` (or at once at start), with a one-line message."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

from tests.spark.conftest import create_topic, produce

pytestmark = [pytest.mark.spark]

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "orders"}


def one_line(error: BaseException) -> str:
    """The user-facing part of a Spark error: no Python traceback, the message on one line."""
    text = str(error)
    assert "Traceback" not in text, text
    assert "UnboundLocalError" not in text, text
    first = text.splitlines()[0]
    assert len(first) < 400, first
    return first


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxOffsetsPerTrigger": "-5"}, "option 'maxOffsetsPerTrigger' must be a positive"),
        ({"bogus": "1"}, "unknown option 'bogus'"),
        ({"subscribe": None, "subscribePattern": "("}, "not a valid regular expression"),
        ({"startingOffsets": "newest"}, "option 'startingOffsets' must be 'earliest', 'latest'"),
        ({"failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be true or false"),
        ({"kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit' is not supported"),
        ({"commitOffsetsToGroup": "yes"}, "'commitOffsetsToGroup' needs 'kafka.group.id'"),
    ],
)
def test_bad_option_fails_at_load_with_one_line(spark, options, message):
    given = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    reader = spark.readStream.format("onceflow").options(**given)
    with pytest.raises(AnalysisException) as raised:
        reader.load()
    assert message in one_line(raised.value)


def test_batch_only_option_on_a_stream_fails_at_start_with_its_own_message(spark, tmp_path):
    frame = spark.readStream.format("onceflow").options(**BASE, endingOffsets="latest").load()
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(60)
    assert "option 'endingOffsets' is only for batch queries" in str(raised.value)
    assert "Traceback" not in str(raised.value) and "UnboundLocalError" not in str(raised.value)


def test_batch_read_with_streaming_option_fails_with_one_line(spark):
    frame = spark.read.format("onceflow").options(**BASE, maxOffsetsPerTrigger="10").load()
    with pytest.raises(AnalysisException) as raised:
        frame.collect()
    assert "'maxOffsetsPerTrigger' is only for streaming queries" in one_line(raised.value)


def test_starting_offsets_past_the_end_says_so(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"a", b"b"], partition=0)
    frame = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}":{{"0":500}}}}')
        .load()
    )
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(60)
    text = str(raised.value)
    assert f"past the end of their partitions: {topic}-0 offset 500 > end 2" in text
    assert "aged out" not in text and "Traceback" not in text
