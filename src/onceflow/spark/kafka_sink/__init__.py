"""The ``onceflow-kafka`` sink: options, one Kafka transaction per task, idempotency
markers."""

from onceflow.spark.kafka_sink.data_source import KafkaSinkDataSource

__all__ = ["KafkaSinkDataSource"]
