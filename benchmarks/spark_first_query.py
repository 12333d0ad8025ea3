"""A fresh Spark job's first query: this checkout against another commit, and against
Spark's own JVM Kafka connector, in one run.

    python benchmarks/spark_first_query.py --against HEAD~1 [--rounds 6] [--sinks noop,kafka]
    .venv-spark-connector/bin/python benchmarks/spark_first_query.py --jvm [--jars DIR]

Each round starts one Python process per variant (this checkout's ``src``; with
``--against``, the other commit's, checked out in a temporary worktree; with ``--jvm``,
Spark's connector, ``spark-sql-kafka-0-10``, whose jars ``make bench`` puts in
``.venv-spark-connector/connector-jars``; the order alternates between rounds). The process
starts ``local_session()`` and runs one streaming query (3,000 records on 3 partitions of
an embedded broker, ``Trigger.AvailableNow``) into the sink, timed from ``load()`` to the
query's end, with its first micro-batch's ``triggerExecution``. That is what a user waits
for at every start and restart of a job, and what every Spark test pays. The sinks:
``noop``; ``database`` (onceflow-database upserting into SQLite; for Spark's connector, a
``foreachBatch`` that collects the batch and upserts it, at least once); ``kafka``
(onceflow-kafka; Spark's Kafka sink, at least once). Prints the medians per variant and
sink, and the ratios to this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SINKS = ("noop", "database", "kafka")

ROUND = r"""
import json, os, sys, time
from onceflow.spark.session import local_session
bootstrap, work, sink, connector = sys.argv[1:5]
jars = [os.path.join(sys.argv[5], n) for n in os.listdir(sys.argv[5])] if connector == "jvm" else []
spark = local_session("first-query", config={"spark.jars": ",".join(jars)} if jars else None)
started = time.monotonic()
reader = (spark.readStream.format("onceflow" if connector == "onceflow" else "kafka")
          .option("kafka.bootstrap.servers", bootstrap).option("subscribe", "orders")
          .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed"))
frame = reader.load()
if sink == "noop":
    writer = frame.writeStream.format("noop")
elif sink == "database" and connector == "jvm":
    import sqlite3
    with sqlite3.connect(f"{work}/out.db") as db:
        db.execute("CREATE TABLE out (id TEXT PRIMARY KEY, body TEXT)")

    def upsert(batch, batch_id):
        rows = batch.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").collect()
        with sqlite3.connect(f"{work}/out.db") as db:
            db.executemany("INSERT INTO out VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET "
                           "body = excluded.body", [tuple(row) for row in rows])

    writer = frame.writeStream.foreachBatch(upsert)
elif sink == "database":
    writer = (frame.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS body")
              .writeStream.format("onceflow-database").option("url", f"sqlite:///{work}/out.db")
              .option("table", "out").option("mode", "upsert").option("keyColumns", "id")
              .option("sinkId", "first-query"))
else:
    writer = (frame.selectExpr("key", "value").writeStream
              .format("onceflow-kafka" if connector == "onceflow" else "kafka")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", "out")
              .option("sinkId", f"first-query-{os.path.basename(work)}"))  # one per checkpoint
query = writer.option("checkpointLocation", f"{work}/checkpoint").trigger(availableNow=True).start()
query.awaitTermination()
batch = query.recentProgress[0]["durationMs"]["triggerExecution"] / 1000
print(json.dumps({"query_s": time.monotonic() - started, "batch_s": batch}))
spark.stop()
"""
JVM = "Spark's connector"
DEFAULT_JARS = Path(sys.prefix) / "connector-jars"


@dataclass(frozen=True)
class Variant:
    source: Path  # the onceflow checkout's src the round imports
    connector: str  # onceflow, or jvm
    jars: Path = DEFAULT_JARS


def one_round(bootstrap: str, variant: Variant, sink: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [sys.executable, "-c", ROUND, bootstrap, work, sink, variant.connector,
             str(variant.jars)],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(variant.source)},
        )  # fmt: skip
    if result.returncode != 0:
        sys.exit(f"the {sink} round of {variant} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a commit to compare with")
    parser.add_argument("--jvm", action="store_true", help="also Spark's JVM Kafka connector")
    parser.add_argument("--jars", type=Path, default=DEFAULT_JARS)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sinks", default=",".join(SINKS), help="of noop,database,kafka")
    args = parser.parse_args()
    sinks = [sink for sink in args.sinks.split(",") if sink]
    if unknown := set(sinks) - set(SINKS):
        sys.exit(f"unknown sinks {sorted(unknown)}: choose from {', '.join(SINKS)}")
    if not args.against and not args.jvm:
        sys.exit("nothing to compare with: give --against COMMIT, --jvm or both")
    if args.jvm and not any(args.jars.glob("spark-sql-kafka-0-10*.jar")):
        sys.exit(f"spark-sql-kafka-0-10 not found in {args.jars} (make bench fetches it)")
    variants = {"this": Variant(ROOT / "src", "onceflow")}
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "other"
        if args.against:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other),
                 args.against],
                check=True,
            )  # fmt: skip
            variants[args.against] = Variant(other / "src", "onceflow")
        if args.jvm:
            variants[JVM] = Variant(ROOT / "src", "jvm", args.jars)
        try:
            runs = measure(variants, sinks, args.rounds)
        finally:
            if args.against:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)]
                )
    print(f"first query of a fresh job, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for sink in sinks:
        for key in ("query_s", "batch_s"):
            medians = {
                name: statistics.median(run[key] for run in runs[sink][name]) for name in variants
            }
            mine = medians["this"]
            others = "   ".join(
                f"{name} {value:5.2f} s (this / it {mine / value:.2f})"
                for name, value in medians.items()
                if name != "this"
            )
            print(f"  {sink:9} {key:8} this {mine:5.2f} s   {others}")


def measure(
    variants: dict[str, Variant], sinks: list[str], rounds: int
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Every variant's rounds per sink, against one embedded broker with the input."""
    from bench_topics import create_topics
    from confluent_kafka import Producer

    from onceflow.broker.process import BrokerProcess

    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        sink: {name: [] for name in variants} for sink in sinks
    }
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(Path(data)).start()
        try:
            create_topics(broker.bootstrap, ["orders", "out"], 3)
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            for i in range(3000):
                producer.produce("orders", value=b"x" * 100, key=str(i).encode(), partition=i % 3)
            producer.flush(30)
            del producer  # closed before the broker stops
            for number in range(rounds):
                order = list(variants) if number % 2 == 0 else list(variants)[::-1]
                for sink in sinks:
                    for name in order:
                        runs[sink][name].append(one_round(broker.bootstrap, variants[name], sink))
        finally:
            broker.stop()
    return runs


if __name__ == "__main__":
    main()
