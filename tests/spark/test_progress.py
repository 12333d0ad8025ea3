"""The source's lag metrics, from the progress of a real query and from progress JSON."""

from __future__ import annotations

import json

import pytest

from onceflow.spark.kafka_source.progress import describe, onceflow_sources, source_metrics
from tests.spark.conftest import ENGINES, create_topic, produce

pytestmark = [pytest.mark.spark]


def test_metrics_from_progress_json():
    source = {
        "description": "org.apache.spark.sql.execution.datasources.v2.python."
        "PythonMicroBatchStreamWithAdmissionControl@1a2b",
        "endOffset": {"orders": {"0": 10, "1": 7}},
        "latestOffset": json.dumps({"orders": {"0": 30, "1": 7}}),
    }
    progress = {"sources": [source, {"description": "RateStreamV2", "endOffset": "5"}]}
    assert list(onceflow_sources(progress)) == [source]
    assert source_metrics(source) == {
        "minOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "10.0",
        "maxOffsetsBehindLatest": "20",
    }
    assert describe(source) == "OnceflowSource[orders]"


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_rate_limited_query_reports_how_far_behind_it_is(spark, engine, topic, tmp_path):
    bootstrap = engine.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"a"] * 30, partition=0)
    produce(bootstrap, topic, [b"b"] * 10, partition=1)
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "8")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    first = next(p for p in query.recentProgress if p["numInputRows"] > 0)
    (source,) = onceflow_sources(first)
    # 8 of 40 read, proportionally: 6 of partition 0's 30 and 2 of partition 1's 10.
    assert source_metrics(source) == {
        "minOffsetsBehindLatest": "8",
        "avgOffsetsBehindLatest": "16.0",
        "maxOffsetsBehindLatest": "24",
    }
    (last,) = onceflow_sources(query.lastProgress)
    assert source_metrics(last)["maxOffsetsBehindLatest"] == "0"
    assert describe(last) == f"OnceflowSource[{topic}]"
