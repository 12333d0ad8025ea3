"""The ``onceflow`` Kafka source: options, offsets, driver-side planning and the executors'
range reads."""

from onceflow.spark.kafka_source.data_source import OnceflowDataSource

__all__ = ["OnceflowDataSource"]
