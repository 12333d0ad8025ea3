"""``format("onceflow-kafka")``: an exactly-once Kafka sink built on Kafka transactions.

Each task writes its output and an idempotency marker in one Kafka transaction
(``task_transaction``, ``markers``); the driver's commit only reports. Keys without an
explicit partition are placed with Kafka's Java-compatible murmur2 partitioner
(librdkafka's ``murmur2_random``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from onceflow.crash_points import spark_step_reached
from onceflow.spark.common import one_line_errors
from onceflow.spark.kafka_sink.options import (
    KafkaSinkOptions,
    check_input_schema,
    parse_kafka_options,
)
from onceflow.spark.kafka_sink.task_transaction import (
    KafkaTaskCommit,
    SinkReusedError,
    write_task,
)
from onceflow.spark.leader_change import KafkaUnavailableError

log = logging.getLogger(__name__)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: KafkaSinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaTaskCommit:
        with one_line_errors(KafkaUnavailableError, SinkReusedError):
            return write_task(self.options, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        spark_step_reached("kafka.before_commit", batchId)
        done = [m for m in messages if m is not None]
        log.info(
            "sink %s batch %d: %d records in %d task transactions (%d replayed tasks skipped)",
            self.options.sink_id,
            batchId,
            sum(m.records for m in done),
            sum(1 for m in done if m.records),
            sum(1 for m in done if m.skipped),
        )

    def abort(self, messages: list[Any], batchId: int) -> None:
        # Committed task transactions stay; the batch's replay skips them by their markers.
        log.warning("sink %s batch %d aborted by Spark", self.options.sink_id, batchId)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: one transaction per task (no markers: a retried task that had
    already committed writes its rows again)."""

    def __init__(self, options: KafkaSinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaTaskCommit:
        with one_line_errors(KafkaUnavailableError, SinkReusedError):
            return write_task(self.options, iterator)

    def commit(self, messages: list[Any]) -> None:
        pass

    def abort(self, messages: list[Any]) -> None:
        pass


class KafkaSinkDataSource(DataSource):
    """``format("onceflow-kafka")``: exactly-once writes to Kafka topics.

    Input columns as in Spark's Kafka sink: ``value`` (string or binary, required),
    ``key`` (string or binary), ``topic`` (string), ``partition`` (int) and ``headers``
    (array<struct<key:string,value:binary>>).

    Options (names case-insensitive, as in Spark; docs/spark.md has the details):

    - ``kafka.bootstrap.servers`` (required): the brokers.
    - ``topic``: the output topic of rows without a ``topic`` column.
    - ``sinkId`` (required for streaming): stable name; the transactional ids
      (``onceflow-<sinkId>-<task partition>``) and the idempotency markers derive from it.
    - ``checkpointLocation``: the query's checkpoint (accepted; the markers need no
      access to it).
    - ``timeoutMs``: timeout of ``init_transactions``, commits and marker reads (60000).
    - ``unavailableTimeoutMs``: how long an output partition without a leader, a moving
      transaction coordinator or an unreachable cluster is waited for (120000).
    - ``kafka.*``: any other producer (librdkafka) setting, prefix removed; defaults
      ``partitioner=murmur2_random``, ``linger.ms=5``, ``transaction.timeout.ms`` =
      ``timeoutMs`` + ``unavailableTimeoutMs`` (180000), ``reconnect.backoff.ms=10``.
      ``kafka.transactional.id``, ``kafka.enable.idempotence`` and the (de)serializer
      settings are refused.
    """

    @classmethod
    def name(cls) -> str:
        return "onceflow-kafka"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_kafka_options(self.options, streaming=True)
        check_input_schema(schema, options.topic)
        return KafkaStreamWriter(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_kafka_options(self.options, streaming=False)
        check_input_schema(schema, options.topic)
        return KafkaBatchWriter(options)
