"""Throughput of the onceflow Spark source and exactly-once sinks against a plain consumer.

    python benchmarks/spark_pipeline.py [--records 1000000] [--partitions 4]
        [--max-offsets-per-trigger 250000] [--databases sqlite,postgresql]
        [--postgres-url postgresql://...] [--master local[2]] [--warmup 50000]
        [--repeat 1] [--verbose] [--only consumer,consumer-default,batch,source,pynoop,
        pynoop-kv,database,database-staged,database-accumulate,plain-database,kafka,
        plain-kafka]

One embedded onceflow broker (``onceflow.testing.BrokerProcess``, temporary data
directory). ``--records`` small JSON records (about 60 bytes: an id, a store, an amount,
a timestamp; keyed by store) are produced ONCE to an input topic of ``--partitions``
partitions, spread evenly; every mode below reads that same data from offset 0 (none of
them commits to a group, so none changes what the next one reads).

One SparkSession (``--master``, default ``local[2]``) is started once. Before anything is
timed, every Spark mode runs once on a warm-up topic (``--warmup`` records): JVM start,
class loading and JIT, Python worker start and imports, table and topic creation are not
counted. Then each mode is timed on its own, ``--repeat`` times, interleaved (all modes,
then all modes again), and the median is reported with the min-max:

1. **consumer** (the ceiling): one confluent-kafka consumer in this process, assign mode,
   ``read_committed`` (the source's default), ``consume(10000)`` until every record has
   arrived; each record's value is touched. Timed from ``assign()`` to the last record.
   It sets ``fetch.queue.backoff.ms=20`` as the source's executors do: with librdkafka's
   default (1000 ms) fetching stops for a second whenever more than 100,000 records are
   queued, and a consumer reading a backlog runs at a fraction of its speed. The
   **consumer-default** row (information only) is the same consumer with the defaults.
2. **batch**: ``spark.read.format("onceflow")`` of the whole topic into Spark's ``noop``
   sink (``df.write.format("noop")``), timed around ``save()`` (planning on the driver,
   one task per partition reading its range on the executors, Arrow into Spark). This is
   the figure the source is judged by against the consumer: it measures the source
   itself, with no streaming bookkeeping around it.
3. **source**: ``spark.readStream.format("onceflow")`` with
   ``maxOffsetsPerTrigger=--max-offsets-per-trigger`` and ``Trigger.AvailableNow`` into
   the ``noop`` streaming sink: the same query shape and micro-batches as the sinks',
   with no Python sink at all. Timed from the start of the
   first micro-batch to the end of the last one, from the query's progress reports:
   every micro-batch in full (offset planning on the driver, the offset-log write, the
   Spark job, the sink's commit, the commit-log write) and the gaps between them. Not
   in it: the query's one-off start (about a second, mostly Spark starting the Python
   process that plans the source's offsets) and stop; that wall time, ``start()`` to
   the end of ``awaitTermination()``, is printed in its own column. Its ratio to the
   consumer is printed too, for information: it includes Spark's fixed cost per
   micro-batch (offset and commit logs, job scheduling), which grows with the number
   of micro-batches.
4. **pynoop**: the stream, ``key``/``value`` cast to strings plus ``partition`` and
   ``offset``, into a Python data source sink that only iterates over its input
   (``bench-python-noop``, defined here): the ceiling of any Python sink. Spark converts
   the rows to Arrow and streams them to a Python worker per task, and runs the sink's
   ``commit`` in a Python process on the driver. The sinks are judged against it.
   **pynoop-kv** (information) is the same sink fed ``key`` and ``value`` as they are,
   the Kafka sink's input.
5. **database**: the pynoop stream into ``onceflow-database``, append mode,
   ``strategy=direct`` (every record becomes a row; each task commits its rows with its
   marker, the driver stores the offsets), once per database of ``--databases``: SQLite
   (a file in the temporary directory) and/or PostgreSQL (``--postgres-url``, or a
   throwaway server started like the tests start one). **database-staged**: the same
   with ``strategy=staged`` (tasks stage, the driver promotes each batch with its
   offsets). **database-accumulate**: per-store totals (``key`` as the store, the JSON
   value's amount, a count) in accumulate mode, ``strategy=direct``: each task adds up
   its rows per store and writes a row per store.
6. **kafka**: the stream, ``key`` and ``value`` as they are, into ``onceflow-kafka``
   (one Kafka transaction per task and micro-batch, with its idempotency marker) writing
   an output topic of ``--partitions`` partitions; timed like **source** (a micro-batch
   ends when every task's transaction is committed).
7. **plain-database** and **plain-kafka** (information): what the same writes cost from a
   Python sink WITHOUT exactly-once, so that the sinks' ratios to them are the price of
   exactly-once itself. plain-database appends each task's Arrow batches to a table
   through ADBC in one transaction, as the direct append does, with no marker, ledger or
   offsets (per database); plain-kafka produces each task's ``key``/``value`` with a plain
   idempotent producer through the Kafka sink's own produce loop and flushes (no
   transaction, no marker). Both are at-least-once: a retried task writes again.

After each run the output is checked (not timed): the batch read's row count, the
query's input rows, the table's row count (or the accumulated totals) and the output
topic's ``read_committed`` record count must all match ``--records``, or the script
fails. records/s = ``--records`` / the timed seconds. Goals: batch / consumer >= 0.5,
database (each database) / pynoop >= 0.8, kafka / pynoop >= 0.9. The 1-minute load
average after each run is printed: the machine may be shared, and single runs move with
the load.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from onceflow.testing import BrokerProcess

MODES = (
    "consumer",
    "consumer-default",
    "batch",
    "source",
    "pynoop",
    "pynoop-kv",
    "database",
    "database-staged",
    "database-accumulate",
    "plain-database",
    "kafka",
    "plain-kafka",
)
# (measure, baseline, goal): the source is measured by the batch read against the plain
# consumer, the sinks against the Python no-op sink of the same query shape (see the
# module docstring). Database modes are named "mode:database".
GOALS = [
    ("batch", "consumer", 0.5),
    ("database:sqlite", "pynoop", 0.8),
    ("database:postgresql", "pynoop", 0.8),
    ("kafka", "pynoop", 0.9),
]
INFO_RATIOS = [
    ("source", "consumer"),
    ("pynoop", "source"),
    ("kafka", "pynoop-kv"),
    ("database-staged:sqlite", "pynoop"),
    ("database-staged:postgresql", "pynoop"),
    ("database-accumulate:sqlite", "pynoop"),
    ("database-accumulate:postgresql", "pynoop"),
    ("plain-database:sqlite", "pynoop"),
    ("plain-database:postgresql", "pynoop"),
    ("plain-kafka", "pynoop"),
]
# What exactly-once itself costs: each sink against a Python sink that writes the same
# data to the same place without it (see PlainDatabaseSink, PlainKafkaSink).
EXACTLY_ONCE_COST = [
    ("database:sqlite", "plain-database:sqlite"),
    ("database:postgresql", "plain-database:postgresql"),
    ("kafka", "plain-kafka"),
]


DATABASE_COLUMNS = ("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
DATABASE_COLUMNS += ("partition", "offset")
# Per-store totals: a handful of rows per task after the task's own pre-aggregation.
ACCUMULATE_COLUMNS = (
    "CAST(key AS STRING) AS store",
    "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS BIGINT) AS revenue",
    "1 AS orders",
)
DATABASES = ("sqlite", "postgresql")


@dataclass
class Timing:
    seconds: float  # the measured figure (see the module docstring)
    wall: float | None = None  # streaming: start() to the end of awaitTermination()
    batches: int | None = None  # streaming: micro-batches run


@dataclass
class Result:
    mode: str
    records: int
    timings: list[Timing] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # 1-minute load average per run

    @property
    def seconds(self) -> float:
        return statistics.median(t.seconds for t in self.timings)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def spread(self) -> str:
        rates = sorted(self.records / t.seconds for t in self.timings)
        return f"{rates[0]:,.0f}-{rates[-1]:,.0f}" if len(rates) > 1 else ""

    @property
    def wall(self) -> float | None:
        walls = [t.wall for t in self.timings if t.wall is not None]
        return statistics.median(walls) if walls else None

    @property
    def batches(self) -> int | None:
        return self.timings[0].batches


# -- data -------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": True,
        }
    )
    started = time.monotonic()
    for n in range(records):
        store = f"s{n % 50}"
        value = json.dumps({"id": f"e{n}", "store": store, "amount": n % 100, "ts": n})
        while True:
            try:
                producer.produce(topic, key=store, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records not acknowledged")
    return time.monotonic() - started


def count_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> int:
    """Records a read_committed consumer gets from ``topic`` (waits up to 60 s for them)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count = 0
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                error = message.error()
                if error is None:
                    count += 1
                    at_end.discard(message.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            if len(at_end) == partitions and count >= expected:
                break
    finally:
        consumer.close()
    return count


# -- modes ------------------------------------------------------------------------------


def plain_consumer(
    bootstrap: str, topic: str, partitions: int, records: int, tuned: bool = True
) -> float:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-plain-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    if tuned:  # what the onceflow source sets too (see onceflow.spark.kafka_source.reader)
        config["fetch.queue.backoff.ms"] = 20
    consumer = Consumer(config)
    try:
        consumer.list_topics(topic, timeout=10)  # connection and metadata: not timed
        started = time.monotonic()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        count = 0
        size = 0
        deadline = started + 600
        while count < records:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    count += 1
                    size += len(message.value())
            if time.monotonic() > deadline:
                raise RuntimeError(f"plain consumer got {count} of {records} records")
        return time.monotonic() - started
    finally:
        consumer.close()


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
        # Imported here: this module's globals travel to the workers pickled by value.
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


class SparkModes:
    def __init__(
        self, spark, bootstrap: str, args: argparse.Namespace, work: Path, urls: dict[str, str]
    ) -> None:
        self.spark = spark
        self.bootstrap = bootstrap
        self.args = args
        self.work = work
        self.urls = urls  # database name -> URL

    def run(self, mode: str, topic: str, expected: int) -> Timing:
        """``mode`` or ``mode:database`` (the database modes run once per database)."""
        name, _, database = mode.partition(":")
        method = getattr(self, name.replace("-", "_"))
        if database:
            return method(topic, expected, self.urls[database])
        return method(topic, expected)

    def _stream(self, topic: str):
        return (
            self.spark.readStream.format("onceflow")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(self.args.max_offsets_per_trigger))
            .load()
        )

    def _run(self, writer, name: str, expected: int) -> Timing:
        checkpoint = self.work / "checkpoints" / f"{name}-{uuid.uuid4().hex[:8]}"
        started = time.time()
        query = (
            writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
        )
        query.awaitTermination()
        wall = time.time() - started
        if query.exception() is not None:
            raise RuntimeError(f"{name}: {query.exception()}")
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        rows = sum(p["numInputRows"] for p in progress)
        if self.args.verbose:
            for p in progress:
                rows_in, durations = p["numInputRows"], p["durationMs"]
                print(f"  {name} batch {p['batchId']}: {rows_in} rows, durations (ms) {durations}")
        if rows != expected:
            raise RuntimeError(f"{name}: the query read {rows} rows, expected {expected}")
        # From the start of the first micro-batch to the end of the last (progress
        # timestamps are the JVM's wall clock, on this machine).
        first = _epoch(progress[0]["timestamp"])
        last = (
            _epoch(progress[-1]["timestamp"]) + progress[-1]["durationMs"]["triggerExecution"] / 1e3
        )
        return Timing(last - first, wall, len(progress))

    def batch(self, topic: str, expected: int) -> Timing:
        frame = (
            self.spark.read.format("onceflow")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", topic)
            .load()
        )
        started = time.monotonic()
        frame.write.format("noop").mode("overwrite").save()
        elapsed = time.monotonic() - started
        rows = frame.count()  # not timed: the same ranges read again
        if rows != expected:
            raise RuntimeError(f"batch: read {rows} rows, expected {expected}")
        return Timing(elapsed)

    def source(self, topic: str, expected: int) -> Timing:
        writer = self._stream(topic).writeStream.format("noop")
        return self._run(writer, "source", expected)

    def pynoop(self, topic: str, expected: int) -> Timing:
        writer = self._stream(topic).selectExpr(*DATABASE_COLUMNS).writeStream
        return self._run(writer.format("bench-python-noop"), "pynoop", expected)

    def pynoop_kv(self, topic: str, expected: int) -> Timing:
        writer = self._stream(topic).select("key", "value").writeStream
        return self._run(writer.format("bench-python-noop"), "pynoop-kv", expected)

    def _database_writer(self, topic: str, columns: tuple[str, ...], url: str, **options: str):
        """A new table's onceflow-database writer (the table name is its sinkId too)."""
        table = f"bench_{uuid.uuid4().hex[:8]}"
        writer = (
            self._stream(topic)
            .selectExpr(*columns)
            .writeStream.format("onceflow-database")
            .options(url=url, table=table, sinkId=table, **options)
        )
        return writer, table

    def database(self, topic: str, expected: int, url: str, strategy: str = "direct") -> Timing:
        writer, table = self._database_writer(
            topic, DATABASE_COLUMNS, url, mode="append", strategy=strategy
        )
        timing = self._run(writer, f"database-{strategy}", expected)
        stored = table_count(url, table)
        if stored != expected:
            raise RuntimeError(f"database: {stored} rows in {table}, expected {expected}")
        return timing

    def database_staged(self, topic: str, expected: int, url: str) -> Timing:
        return self.database(topic, expected, url, strategy="staged")

    def database_accumulate(self, topic: str, expected: int, url: str) -> Timing:
        writer, table = self._database_writer(
            topic, ACCUMULATE_COLUMNS, url, mode="accumulate", keyColumns="store"
        )
        timing = self._run(writer, "database-accumulate", expected)
        totals = table_totals(url, table)
        wanted = (sum(n % 100 for n in range(expected)), expected)
        if totals != wanted:
            raise RuntimeError(f"accumulate: totals {totals} in {table}, expected {wanted}")
        return timing

    def plain_database(self, topic: str, expected: int, url: str) -> Timing:
        from onceflow.db import Database

        table = f"plain_{uuid.uuid4().hex[:8]}"
        big = "BIGINT" if url.startswith("postgresql") else "INTEGER"
        db = Database(url)
        try:
            db.execute(
                f'CREATE TABLE {table} (key TEXT, value TEXT, "partition" INTEGER, "offset" {big})'
            )
        finally:
            db.close()
        writer = (
            self._stream(topic)
            .selectExpr(*DATABASE_COLUMNS)
            .writeStream.format("bench-plain-adbc")
            .options(url=url, table=table)
        )
        timing = self._run(writer, "plain-database", expected)
        stored = table_count(url, table)
        if stored != expected:  # a task retry would have appended twice: not comparable
            raise RuntimeError(f"plain-database: {stored} rows in {table}, expected {expected}")
        return timing

    def plain_kafka(self, topic: str, expected: int) -> Timing:
        out = f"{topic}-plain-{uuid.uuid4().hex[:6]}"
        create_topic(self.bootstrap, out, self.args.partitions)
        writer = (
            self._stream(topic)
            .select("key", "value")
            .writeStream.format("bench-plain-kafka")
            .options(bootstrap=self.bootstrap, topic=out)
        )
        timing = self._run(writer, "plain-kafka", expected)
        stored = count_committed(self.bootstrap, out, self.args.partitions, expected)
        if stored != expected:
            raise RuntimeError(f"plain-kafka: {stored} records in {out}, expected {expected}")
        return timing

    def kafka(self, topic: str, expected: int) -> Timing:
        out = f"{topic}-out-{uuid.uuid4().hex[:6]}"
        create_topic(self.bootstrap, out, self.args.partitions)
        writer = (
            self._stream(topic)
            .select("key", "value")
            .writeStream.format("onceflow-kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", out)
            .option("sinkId", out)
        )
        timing = self._run(writer, "kafka", expected)
        stored = count_committed(self.bootstrap, out, self.args.partitions, expected)
        if stored != expected:
            raise RuntimeError(f"kafka: {stored} committed records in {out}, expected {expected}")
        return timing


def _epoch(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def table_count(url: str, table: str) -> int:
    from onceflow.db import Database

    db = Database(url)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


def table_totals(url: str, table: str) -> tuple[int, int]:
    from onceflow.db import Database

    db = Database(url)
    try:
        revenue, orders = db.execute(f"SELECT SUM(revenue), SUM(orders) FROM {table}").fetchone()
        return int(revenue), int(orders)
    finally:
        db.close()


def start_spark(master: str):
    from onceflow.spark.session import local_session

    spark = local_session("onceflow-bench", master=master)
    if __name__ != "__main__":  # imported: Python workers cannot import this file
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(PythonNoopSink)
    spark.dataSource.register(PlainKafkaSink)
    spark.dataSource.register(PlainDatabaseSink)
    return spark


# -- report -----------------------------------------------------------------------------


LABELS = {
    "consumer": "plain confluent-kafka consumer (ceiling)",
    "consumer-default": "plain consumer, librdkafka defaults (info)",
    "batch": "onceflow source, batch read -> noop",
    "source": "onceflow source, AvailableNow -> noop",
    "pynoop": "-> Python no-op sink (key, value, partition, offset)",
    "pynoop-kv": "-> Python no-op sink (key, value)",
    "database": "-> onceflow-database append, direct",
    "database-staged": "-> onceflow-database append, staged",
    "database-accumulate": "-> onceflow-database accumulate per store, direct",
    "plain-database": "-> plain Python ADBC append sink, at-least-once",
    "kafka": "-> onceflow-kafka",
    "plain-kafka": "-> plain Python Kafka sink, idempotent producer, at-least-once",
}


def print_report(
    results: dict[str, Result], args: argparse.Namespace, databases: list[str], loads: list
) -> None:
    print()
    print(
        f"{args.records:,} records, {args.partitions} partitions, master {args.master}, "
        f"maxOffsetsPerTrigger {args.max_offsets_per_trigger:,}, "
        f"databases {', '.join(databases)}"
    )
    header = ["mode", "records/s", "seconds", "batches", "wall s", "load 1m"]
    if args.repeat > 1:
        header[1:2] = ["records/s (median)", "min-max"]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for mode, r in results.items():
        name, _, database = mode.partition(":")
        label = LABELS[name] + (f" ({database})" if database else "")
        cells = [label, f"{r.rate:,.0f}"]
        if args.repeat > 1:
            cells.append(r.spread)
        cells += [
            f"{r.seconds:.2f}",
            str(r.batches) if r.batches is not None else "",
            f"{r.wall:.2f}" if r.wall is not None else "",
            "/".join(f"{load:.1f}" for load in r.loads),
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    for mode, base, goal in GOALS:
        if mode in results and base in results:
            ratio = results[mode].rate / results[base].rate
            verdict = "ok" if ratio >= goal else "MISSED"
            print(f"{mode} / {base}: {ratio:.2f}  (goal >= {goal:.1f}: {verdict})")
    for mode, base in INFO_RATIOS:
        if mode in results and base in results:
            print(f"{mode} / {base}: {results[mode].rate / results[base].rate:.2f}  (information)")
    for mode, base in EXACTLY_ONCE_COST:
        if mode in results and base in results:
            ratio = results[mode].rate / results[base].rate
            print(f"{mode} / {base}: {ratio:.2f}  (the cost of exactly-once itself)")
    print("load average (1m, 5m, 15m) at start and end:", *loads)


def start_postgres(work: Path) -> Any:
    """A throwaway PostgreSQL server, started as the tests start one (fsync=off)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.postgres import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found: give --postgres-url or ONCEFLOW_PG_BIN")
    return PostgresServer(bin_dir).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=250_000)
    parser.add_argument(
        "--databases",
        default="sqlite",
        help="comma-separated: sqlite (a file in the temporary directory), postgresql",
    )
    parser.add_argument(
        "--postgres-url", help="PostgreSQL for --databases postgresql (default: start one)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--warmup", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode (median)")
    parser.add_argument("--only", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--verbose", action="store_true", help="print every micro-batch")
    args = parser.parse_args(argv)
    chosen = [m for m in args.only.split(",") if m]
    unknown = set(chosen) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; use {','.join(MODES)}")
    databases = [d for d in args.databases.split(",") if d]
    if set(databases) - set(DATABASES) or not databases:
        parser.error(f"--databases: use {','.join(DATABASES)}")
    modes = [
        f"{m}:{d}" if "database" in m else m
        for m in chosen
        for d in (databases if "database" in m else [""])
    ]

    work = Path(tempfile.mkdtemp(prefix="onceflow-spark-bench-"))
    loads = [tuple(round(x, 2) for x in os.getloadavg())]
    broker = BrokerProcess(work / "broker", log_path=work / "broker.log").start()
    spark = None
    postgres = None
    try:
        urls = {"sqlite": f"sqlite:///{work / 'bench.db'}"}
        if "postgresql" in databases:
            if args.postgres_url:
                urls["postgresql"] = args.postgres_url
            else:
                postgres = start_postgres(work)
                urls["postgresql"] = postgres.create_database()
        bootstrap = broker.bootstrap
        topic = "bench-input"
        warmup = "bench-warmup"
        create_topic(bootstrap, topic, args.partitions)
        create_topic(bootstrap, warmup, args.partitions)
        seconds = produce(bootstrap, topic, args.records, args.partitions)
        print(f"produced {args.records:,} records in {seconds:.1f} s", flush=True)
        produce(bootstrap, warmup, args.warmup, args.partitions)

        spark_modes = [m for m in modes if not m.startswith("consumer")]
        runner: SparkModes | None = None
        if spark_modes:
            started = time.monotonic()
            spark = start_spark(args.master)
            runner = SparkModes(spark, bootstrap, args, work, urls)
            for mode in spark_modes:  # warm-up, not counted
                runner.run(mode, warmup, args.warmup)
            print(f"Spark started and warmed up in {time.monotonic() - started:.1f} s", flush=True)

        results = {mode: Result(mode, args.records) for mode in modes}
        for repetition in range(args.repeat):  # interleaved: noise hits every mode alike
            for mode in modes:
                run: Callable[[str, int], Timing]
                if mode in ("consumer", "consumer-default"):

                    def run(t: str, n: int, tuned: bool = mode == "consumer") -> Timing:
                        return Timing(plain_consumer(bootstrap, t, args.partitions, n, tuned))
                else:
                    assert runner is not None

                    def run(t: str, n: int, mode: str = mode) -> Timing:
                        return runner.run(mode, t, n)

                timing = run(topic, args.records)
                results[mode].timings.append(timing)
                results[mode].loads.append(os.getloadavg()[0])
                print(
                    f"[{repetition + 1}/{args.repeat}] {mode}: {timing.seconds:.2f} s, "
                    f"{args.records / timing.seconds:,.0f} records/s",
                    flush=True,
                )
        loads.append(tuple(round(x, 2) for x in os.getloadavg()))
        print_report(results, args, databases, loads)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
