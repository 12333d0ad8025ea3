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
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import spark_peer_sinks
from spark_bench_data import (
    count_committed,
    create_topic,
    plain_consumer,
    produce,
    table_count,
    table_totals,
)
from spark_bench_report import Result, Timing, print_report

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


DATABASE_COLUMNS = ("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
DATABASE_COLUMNS += ("partition", "offset")
# Per-store totals: a handful of rows per task after the task's own pre-aggregation.
ACCUMULATE_COLUMNS = (
    "CAST(key AS STRING) AS store",
    "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS BIGINT) AS revenue",
    "1 AS orders",
)
DATABASES = ("sqlite", "postgresql")


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


def start_spark(master: str):
    from onceflow.spark.session import local_session

    spark = local_session("onceflow-bench", master=master)
    spark_peer_sinks.register(spark)
    return spark


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
            for mode in spark_modes if args.warmup else ():  # warm-up, not counted
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
