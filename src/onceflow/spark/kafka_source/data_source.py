"""The ``onceflow`` Spark data source: Kafka topics as a streaming or batch DataFrame.

``onceflow.spark.register(spark)`` (rather than ``spark.dataSource.register``, see docs/spark.md),
then ``spark.readStream.format("onceflow")`` or ``spark.read.format("onceflow")`` with the
options of Spark's Kafka connector. Planning (offsets, partitions) runs on the driver in
a long-lived Python process; ``read()`` runs on executors in a fresh unpickled copy of the
reader, so everything a task needs travels in its ``OffsetRangePartition`` and the reader's
plain-data settings.

This module is what Spark's ``create_data_source`` process imports (to read the options
and the schema, nothing else): the readers, with confluent-kafka and pyarrow, are imported
by ``streamReader()`` and ``reader()``, in the processes that plan and read. That takes
about 0.2 s off each query's start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from onceflow.spark.common import lower_case_options
from onceflow.spark.kafka_source.options import (
    OnceflowOptionError,
    one_line_errors,
    parse_bool,
    parse_options,
)
from onceflow.spark.kafka_source.schema import check_schema, spark_schema

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader


class OnceflowDataSource(DataSource):
    """``format("onceflow")``: Kafka topics with the schema of Spark's Kafka connector.

    Columns ``key``, ``value`` (binary), ``topic``, ``partition``, ``offset``,
    ``timestamp``, ``timestampType``, and ``headers`` with ``includeHeaders=true``.

    Options, named as in Spark's Kafka connector (case-insensitive; docs/spark.md has the
    details):

    - ``kafka.bootstrap.servers`` (required): the brokers.
    - exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a
      regular expression that matches whole topic names) or ``assign`` (JSON
      ``{"topicA":[0,1]}``).
    - ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"topicA":{"0":23,"1":-2}}``
      (-2 earliest, -1 latest); default ``latest`` for streaming, ``earliest`` for batch.
    - ``endingOffsets`` (batch only): ``latest`` (default) or JSON as above.
    - ``maxOffsetsPerTrigger`` (streaming): at most this many offsets per micro-batch.
    - ``minPartitions``: split offset ranges into at least this many Spark tasks.
    - ``failOnDataLoss``: fail when data to read is gone (default ``true``).
    - ``includeHeaders``: add the ``headers`` column (default ``false``).
    - ``kafkaConsumer.pollTimeoutMs``: how long a task waits for records (120000).
    - ``maxRecordsPerBatch``: records per Arrow batch handed to Spark (10000).
    - ``unavailableTimeoutMs``: how long a partition without a leader, or a cluster that
      does not answer, is waited for before the query fails (120000).
    - ``commitOffsetsToGroup`` (streaming): commit each finished batch's end offsets to
      ``kafka.group.id``, for lag tools (default ``false``).
    - ``kafka.isolation.level``: ``read_committed`` (default) or ``read_uncommitted``.
    - ``kafka.*``: any other consumer (librdkafka) setting, prefix removed; the few that
      would break the source (``kafka.auto.offset.reset``, ``kafka.enable.auto.commit``,
      ...) are refused, as Spark refuses them.
    - Accepted for Spark compatibility, no effect: ``fetchOffset.numRetries``,
      ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        with one_line_errors():
            parse_options(self.options, batch=None)  # bad options fail at load(), not start()

    @classmethod
    def name(cls) -> str:
        return "onceflow"

    def _include_headers(self) -> bool:
        value = lower_case_options(self.options).get("includeheaders")
        return parse_bool("includeHeaders", value, False)

    def schema(self) -> StructType:
        return spark_schema(self._include_headers())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from onceflow.spark.kafka_source.stream_reader import (
            OnceflowStreamReader,
            RefusedStreamReader,
        )

        try:
            options = parse_options(self.options, batch=False)
            check_schema(schema, options.include_headers)
        except OnceflowOptionError as error:
            # PySpark (4.0-4.3) calls stop() on the reader when streamReader() raises,
            # before one exists, and reports only that UnboundLocalError: fail at the
            # query's first call instead, with this error.
            return RefusedStreamReader(error)
        return OnceflowStreamReader(options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from onceflow.spark.kafka_source.batch_reader import OnceflowBatchReader

        with one_line_errors():
            options = parse_options(self.options, batch=True)
            check_schema(schema, options.include_headers)
        return OnceflowBatchReader(options)
