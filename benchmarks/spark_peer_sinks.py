"""The peers benchmarks/spark_pipeline.py measures onceflow's sinks against: Python data
source sinks that do nothing, or write the same data to the same place at least once.

Spark's Python workers cannot import this file: ``register`` pickles it by value."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)


class PythonNoopSink(DataSource):
    """``format("bench-python-noop")``: a Python sink that only iterates over its input.

    What any Python data source sink costs before it does anything: Spark turns the rows
    into Arrow batches and streams them to a Python worker per task, and calls the
    driver-side ``commit`` in a Python process per micro-batch.
    """

    @classmethod
    def name(cls) -> str:
        return "bench-python-noop"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _NoopStreamWriter()


class _NoopStreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class PlainKafkaSink(DataSource):
    """``format("bench-plain-kafka")``: an at-least-once Python Kafka sink.

    Each task produces its rows with a plain idempotent producer (no transaction, no
    marker) through the same produce loop as ``onceflow-kafka`` and flushes: what writing
    to Kafka from a Python sink costs without exactly-once. Options: ``bootstrap``,
    ``topic``.
    """

    @classmethod
    def name(cls) -> str:
        return "bench-plain-kafka"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _PlainKafkaWriter(self.options["bootstrap"], self.options["topic"])


class _PlainKafkaWriter(DataSourceStreamArrowWriter):
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        # Imported here: this module travels to the workers pickled by value.
        from confluent_kafka import Producer

        from onceflow.spark.kafka_sink.task_transaction import produce_batches

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "partitioner": "murmur2_random",
                "linger.ms": 5,
            }
        )
        produce_batches(producer, iterator, self.topic)
        if producer.flush(60):
            raise RuntimeError("bench-plain-kafka: records not acknowledged")
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class PlainDatabaseSink(DataSource):
    """``format("bench-plain-adbc")``: an at-least-once Python database sink.

    Each task appends its Arrow batches to an existing table through ADBC in one
    transaction, as ``onceflow-database``'s direct append does, with no marker, no ledger
    and no offsets: what writing to the database from a Python sink costs without
    exactly-once. Options: ``url`` (sqlite:///... or postgresql://...), ``table``.
    """

    @classmethod
    def name(cls) -> str:
        return "bench-plain-adbc"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _PlainDatabaseWriter(self.options["url"], self.options["table"])


class _PlainDatabaseWriter(DataSourceStreamArrowWriter):
    def __init__(self, url: str, table: str) -> None:
        self.url = url
        self.table = table

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa

        from onceflow.db import DatabaseUrl

        received = [batch for batch in iterator if batch.num_rows]
        if not received:
            return WriterCommitMessage()
        data = pa.Table.from_batches(received)
        target = DatabaseUrl.parse(self.url).target
        if self.url.startswith("sqlite"):
            import adbc_driver_sqlite.dbapi as dbapi

            connection = dbapi.connect(target, autocommit=True)
            cursor = connection.cursor()
            cursor.execute("PRAGMA busy_timeout = 60000")
            cursor.fetchall()
            cursor.execute("BEGIN IMMEDIATE")
            cursor.adbc_ingest(self.table, data, mode="append")
            cursor.execute("COMMIT")
        else:
            import adbc_driver_postgresql.dbapi as dbapi

            connection = dbapi.connect(target)
            cursor = connection.cursor()
            cursor.adbc_ingest(self.table, data, mode="append")
            connection.commit()
        cursor.close()
        connection.close()
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


def register(spark: Any) -> None:
    """Make the three sinks' formats known to ``spark``."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    for sink in (PythonNoopSink, PlainKafkaSink, PlainDatabaseSink):
        spark.dataSource.register(sink)
