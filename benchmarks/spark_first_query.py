"""A fresh Spark job's first query, this checkout against another commit, in one run.

    python benchmarks/spark_first_query.py --against HEAD~1 [--rounds 6] [--sinks noop,kafka]

Each round starts one Python process per variant (this checkout's ``src``, then the other
commit's, checked out in a temporary worktree; the order alternates between rounds). The
process starts ``local_session()`` and runs one streaming query of the onceflow source
(3,000 records on 3 partitions of an embedded broker, ``Trigger.AvailableNow``) into the
sink, timed from ``load()`` to the query's end, with its first micro-batch's
``triggerExecution``. That is what a user waits for at every start and restart of a job,
and what every Spark test pays. Prints the medians per variant and sink, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SINKS = ("noop", "database", "kafka")

ROUND = r"""
import json, os, sys, time
from onceflow.spark.session import local_session
bootstrap, work, sink = sys.argv[1], sys.argv[2], sys.argv[3]
spark = local_session("first-query")
started = time.monotonic()
frame = (spark.readStream.format("onceflow").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "orders").option("startingOffsets", "earliest").load())
if sink == "noop":
    writer = frame.writeStream.format("noop")
elif sink == "database":
    writer = (frame.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS body")
              .writeStream.format("onceflow-database").option("url", f"sqlite:///{work}/out.db")
              .option("table", "out").option("mode", "upsert").option("keyColumns", "id")
              .option("sinkId", "first-query"))
else:
    writer = (frame.selectExpr("key", "value").writeStream.format("onceflow-kafka")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", "out")
              .option("sinkId", f"first-query-{os.path.basename(work)}"))  # one per checkpoint
query = writer.option("checkpointLocation", f"{work}/checkpoint").trigger(availableNow=True).start()
query.awaitTermination()
batch = query.recentProgress[0]["durationMs"]["triggerExecution"] / 1000
print(json.dumps({"query_s": time.monotonic() - started, "batch_s": batch}))
spark.stop()
"""


def one_round(bootstrap: str, source: Path, sink: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [sys.executable, "-c", ROUND, bootstrap, work, sink],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(source)},
        )  # fmt: skip
    if result.returncode != 0:
        sys.exit(f"the {sink} round of {source} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sinks", default=",".join(SINKS), help="of noop,database,kafka")
    args = parser.parse_args()
    sinks = [sink for sink in args.sinks.split(",") if sink]
    if unknown := set(sinks) - set(SINKS):
        sys.exit(f"unknown sinks {sorted(unknown)}: choose from {', '.join(SINKS)}")
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "other"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), args.against],
            check=True,
        )  # fmt: skip
        variants = {"this": ROOT / "src", args.against: other / "src"}
        try:
            runs = measure(variants, sinks, args.rounds)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)])
    print(f"first query of a fresh job, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for sink in sinks:
        mine, theirs = (runs[sink][name] for name in variants)
        for key in ("query_s", "batch_s"):
            a = statistics.median(run[key] for run in mine)
            b = statistics.median(run[key] for run in theirs)
            print(f"  {sink:9} {key:8} this {a:5.2f} s   {args.against} {b:5.2f} s   "
                  f"ratio {a / b:.2f}")  # fmt: skip


def measure(
    variants: dict[str, Path], sinks: list[str], rounds: int
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Every variant's rounds per sink, against one embedded broker with the input."""
    from bench_topics import create_topics
    from confluent_kafka import Producer

    from onceflow.broker.process import BrokerProcess
    from onceflow.testing import start_broker

    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        sink: {name: [] for name in variants} for sink in sinks
    }
    with tempfile.TemporaryDirectory() as data:
        broker = start_broker(BrokerProcess(Path(data)))
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
