"""onceflow.spark.register gives each data source a thread-safe environment map.

Spark shares one environment map between every query on a registered Python data source,
and each streaming query's PythonStreamingSourceRunner writes into it without a lock; see
onceflow.spark.registration and test_multi_query_restart.py for what a plain HashMap does.
"""

from __future__ import annotations

import pytest

from onceflow.spark.registration import environment_map

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.mark.parametrize("name", ["onceflow", "onceflow-database", "onceflow-kafka"])
def test_registered_sources_have_a_concurrent_environment_map(spark, name):
    env = environment_map(spark, name)
    assert env.getClass().getName() == "java.util.concurrent.ConcurrentHashMap"
    assert env.get("PYTHONHASHSEED") == spark.sparkContext.environment["PYTHONHASHSEED"]


def test_source_works_after_its_runner_wrote_into_the_shared_map(spark, kafka_broker, topic):
    from tests.spark.sink_helpers import make_orders

    make_orders(kafka_broker.bootstrap, topic, 10)
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName(f"registration_{topic.replace('-', '_')}")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.sql(f"SELECT * FROM registration_{topic.replace('-', '_')}").count()
    assert rows == 10
    # PythonStreamingSourceRunner.init() put its settings into the registered map itself
    assert environment_map(spark, "onceflow").containsKey("SPARK_LOCAL_DIRS")
