"""onceflow's Spark source against Spark's own JVM Kafka connector (spark-sql-kafka-0-10).

    .venv-spark-connector/bin/python benchmarks/spark_connector.py
        [--records 1000000] [--partitions 4] [--repeat 3] [--engines onceflow,kafka]
        [--max-offsets-per-trigger 250000] [--jars DIR] [--master local[2]]

The JVM connector is compiled against one Spark release, so this runs in its own
virtualenv whose pyspark is that release (``make bench`` makes ``.venv-spark-connector``
with pyspark 4.2.0 and onceflow, and fetches the connector's jars with Maven from
``benchmarks/spark_kafka_connector/pom.xml`` into ``.venv-spark-connector/connector-jars``).
Both sources run in the same SparkSession (``local[2]``), on the same Spark.

Per engine (bench_engines.py: onceflow's broker, and Apache Kafka with its defaults), one
topic of ``--partitions`` partitions is filled once with ``--records`` JSON records of
about 60 bytes (as benchmarks/spark_pipeline.py's). Then, ``--repeat`` times, interleaved
(every mode, then every mode again), each mode reads the whole topic:

* **consumer**: one plain confluent-kafka consumer in this process (assign mode,
  read_committed, ``fetch.queue.backoff.ms=20`` as the source's executors use), from
  ``assign()`` to the last record: the Python ceiling.
* **onceflow batch** / **jvm batch**: ``spark.read.format("onceflow")`` /
  ``spark.read.format("kafka")`` (``startingOffsets=earliest``, ``endingOffsets=latest``)
  into Spark's ``noop`` sink, timed around ``save()``.
* **onceflow AvailableNow** / **jvm AvailableNow**: ``spark.readStream`` of either,
  ``maxOffsetsPerTrigger=--max-offsets-per-trigger``, ``Trigger.AvailableNow``, into the
  ``noop`` streaming sink; timed from the start of the first micro-batch to the end of the
  last (from the query's progress reports); the query's start and stop are in "wall s".

Both sources read ``read_committed`` (the JVM connector is given
``kafka.isolation.level=read_committed``; onceflow's source defaults to it). Every run
checks the row count. Printed: records/s per mode and engine (median, min-max), and the
ratios onceflow/jvm (batch, AvailableNow) and onceflow batch/consumer, each batch source's
fixed cost (a read of one record per partition: planning, job and tasks, which the plain
consumer's figure, timed from ``assign()``, does not pay), with the machine's load average at
the start and the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench_engines import Engine, parse_engines, start_engine
from bench_topics import create_topics
from spark_bench_data import plain_consumer
from spark_bench_data import produce as fill

MODES = ("consumer", "onceflow-batch", "jvm-batch", "onceflow-availablenow", "jvm-availablenow")
DEFAULT_JARS = Path(sys.prefix) / "connector-jars"


class Modes:
    def __init__(self, spark, args: argparse.Namespace, work: Path) -> None:
        self.spark = spark
        self.args = args
        self.work = work

    def run(self, mode: str, engine: Engine, topic: str) -> tuple[float, float | None]:
        """(seconds timed, wall seconds of a streaming query or None)."""
        if mode == "consumer":
            seconds = plain_consumer(engine.bootstrap, topic, self.args.partitions,
                                     self.args.records)  # fmt: skip
            return seconds, None
        source, shape = mode.split("-")
        if shape == "batch":
            return self.batch(source, engine.bootstrap, topic), None
        return self.available_now(source, engine.bootstrap, topic)

    def _options(self, source: str, bootstrap: str, topic: str) -> dict[str, str]:
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
        if source == "jvm":
            options.update(
                {"startingOffsets": "earliest", "kafka.isolation.level": "read_committed"}
            )
        else:
            options["startingOffsets"] = "earliest"
        return options

    def batch(self, source: str, bootstrap: str, topic: str) -> float:
        options = self._options(source, bootstrap, topic)
        if source == "jvm":
            options["endingOffsets"] = "latest"
        frame = self.spark.read.format("kafka" if source == "jvm" else "onceflow")
        frame = frame.options(**options).load()
        started = time.monotonic()
        frame.write.format("noop").mode("overwrite").save()
        elapsed = time.monotonic() - started
        rows = frame.count()  # not timed
        if rows != self.args.records:
            raise RuntimeError(f"{source} batch read {rows} rows, expected {self.args.records}")
        return elapsed

    def available_now(self, source: str, bootstrap: str, topic: str) -> tuple[float, float]:
        options = self._options(source, bootstrap, topic)
        options["maxOffsetsPerTrigger"] = str(self.args.max_offsets_per_trigger)
        stream = self.spark.readStream.format("kafka" if source == "jvm" else "onceflow")
        checkpoint = self.work / "checkpoints" / f"{source}-{uuid.uuid4().hex[:8]}"
        started = time.time()
        query = (
            stream.options(**options).load().writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        wall = time.time() - started
        if query.exception() is not None:
            raise RuntimeError(f"{source} AvailableNow: {query.exception()}")
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        rows = sum(p["numInputRows"] for p in progress)
        if rows != self.args.records:
            raise RuntimeError(f"{source} AvailableNow read {rows} rows, not {self.args.records}")
        first = _epoch(progress[0]["timestamp"])
        last = (
            _epoch(progress[-1]["timestamp"]) + progress[-1]["durationMs"]["triggerExecution"] / 1e3
        )
        return last - first, wall


def _epoch(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def start_spark(master: str, jars: Path):
    from onceflow.spark.session import local_session

    found = sorted(str(jar) for jar in jars.glob("*.jar"))
    if not any("spark-sql-kafka" in jar for jar in found):
        raise SystemExit(f"spark-sql-kafka-0-10 not found in {jars} (make bench fetches it)")
    return local_session("onceflow-bench-connector", master=master,
                         config={"spark.jars": ",".join(found)})  # fmt: skip


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engines", default="onceflow")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=250_000)
    parser.add_argument("--jars", type=Path, default=DEFAULT_JARS)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]

    import pyspark

    work = Path(tempfile.mkdtemp(prefix="spark-connector-"))
    engines: list[Engine] = []
    results: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    spark = None
    try:
        engines = [start_engine(name, work) for name in parse_engines(args.engines)]
        topics = {}
        for engine in engines:
            topics[engine.name] = f"connector-{uuid.uuid4().hex[:8]}"
            create_topics(engine.bootstrap, [topics[engine.name]], args.partitions)
            fill(engine.bootstrap, topics[engine.name], args.records, args.partitions)
        spark = start_spark(args.master, args.jars)
        runner = Modes(spark, args, work)
        print(
            f"{args.records:,} records of about 60 bytes, {args.partitions} partitions, "
            f"pyspark {pyspark.__version__}, master {args.master}, maxOffsetsPerTrigger "
            f"{args.max_offsets_per_trigger:,}; engines {', '.join(e.name for e in engines)}",
            flush=True,
        )
        # Warm-up (not counted): JVM classes and JIT, Python workers, both connectors.
        warm_args = argparse.Namespace(**{**vars(args), "records": 50_000})
        warm = Modes(spark, warm_args, work)
        for engine in engines:
            topic = f"warm-{uuid.uuid4().hex[:8]}"
            create_topics(engine.bootstrap, [topic], args.partitions)
            fill(engine.bootstrap, topic, 50_000, args.partitions)
            for mode in modes:
                warm.run(mode, engine, topic)
        # A batch read's fixed cost: one record per partition, every run below pays it once.
        fixed: dict[tuple[str, str], float] = {}
        for engine in engines:
            topic = f"tiny-{uuid.uuid4().hex[:8]}"
            create_topics(engine.bootstrap, [topic], args.partitions)
            fill(engine.bootstrap, topic, args.partitions, args.partitions)
            tiny = Modes(spark, argparse.Namespace(**{**vars(args), "records": args.partitions}),
                         work)  # fmt: skip
            for source in ("onceflow", "jvm"):
                if f"{source}-batch" in modes:
                    fixed[(engine.name, source)] = statistics.median(
                        tiny.batch(source, engine.bootstrap, topic) for _ in range(5)
                    )
        print(f"machine load at start: {load()}", flush=True)
        for repetition in range(args.repeat):
            for engine in engines:
                for mode in modes:
                    seconds, wall = runner.run(mode, engine, topics[engine.name])
                    results.setdefault((engine.name, mode), []).append((seconds, wall))
                    extra = f" (wall {wall:.1f} s)" if wall is not None else ""
                    rate = args.records / seconds
                    print(f"  run {repetition + 1}: {engine.name} {mode:22s} "
                          f"{rate:10,.0f} records/s{extra}", flush=True)  # fmt: skip
    finally:
        if spark is not None:
            spark.stop()
        for engine in engines:
            engine.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'engine':9s} {'mode':22s} {'records/s':>10s} {'(min-max)':>24s} {'wall s':>7s}")
    rates: dict[tuple[str, str], list[float]] = {}
    for (engine, mode), runs in results.items():
        rates[(engine, mode)] = [args.records / seconds for seconds, _ in runs]
        walls = [wall for _, wall in runs if wall is not None]
        wall = f"{statistics.median(walls):7.1f}" if walls else ""
        values = rates[(engine, mode)]
        print(f"{engine:9s} {mode:22s} {statistics.median(values):10,.0f} "
              f"({min(values):10,.0f}-{max(values):10,.0f}) {wall}")  # fmt: skip
    for engine in (e.name for e in engines):
        for ours, theirs in (
            ("onceflow-batch", "jvm-batch"),
            ("onceflow-availablenow", "jvm-availablenow"),
            ("onceflow-batch", "consumer"),
            ("jvm-batch", "consumer"),
        ):
            a, b = rates.get((engine, ours)), rates.get((engine, theirs))
            if a and b:
                paired = [x / y for x, y in zip(a, b, strict=True)]
                ratio = statistics.median(a) / statistics.median(b)
                print(
                    f"{engine}: {ours} / {theirs}: {ratio:.2f}x"
                    f" (within repetitions median {statistics.median(paired):.2f}x,"
                    f" {min(paired):.2f}x-{max(paired):.2f}x)"
                )
    for (engine, source), seconds in fixed.items():
        print(f"{engine}: {source}-batch of {args.partitions} records (one per partition), "
              f"the fixed cost in every batch read: {seconds:.3f} s (median of 5)")  # fmt: skip
    print(f"machine load at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
