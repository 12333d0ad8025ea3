"""PySpark pipelines: the ``onceflow`` Kafka source (and the exactly-once sinks).

from onceflow.spark import OnceflowDataSource
spark.dataSource.register(OnceflowDataSource)      # or onceflow.spark.register(spark)
df = (spark.readStream.format("onceflow")
      .option("kafka.bootstrap.servers", "127.0.0.1:9092")
      .option("subscribe", "orders")
      .load())
"""

from __future__ import annotations

from typing import Any

from onceflow.spark.source import OnceflowDataSource

__all__ = ["OnceflowDataSource", "register"]


def register(spark: Any) -> None:
    """Register every onceflow data source with ``spark`` (a SparkSession)."""
    spark.dataSource.register(OnceflowDataSource)
