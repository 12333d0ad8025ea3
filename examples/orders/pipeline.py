"""The orders pipeline: per-store revenue in a database and one confirmation per order.

Both outputs are exactly-once end to end:

* ``store_revenue(store, revenue, orders)`` is kept as running totals by the
  ``onceflow-database`` sink, which commits each micro-batch's results together with the
  batch's source offsets in one database transaction (a replayed batch is a no-op);
* ``order-confirmations`` gets one event per order from the ``onceflow-kafka`` sink, which
  writes each task's output in one Kafka transaction with an idempotency marker.

Run: python examples/orders/pipeline.py --bootstrap HOST:PORT --database-url URL
     --checkpoint-dir DIR [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from onceflow.spark.kafka_source.progress import onceflow_sources, source_metrics
from onceflow.spark.session import local_session

stopping = threading.Event()  # set by SIGTERM: stop the queries cleanly

ORDER = StructType(
    [
        StructField("order_id", StringType()),
        StructField("store", StringType()),
        StructField("amount", LongType()),
        StructField("ts", LongType()),
    ]
)


def build_queries(spark: SparkSession, args: argparse.Namespace) -> list:
    orders = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
    )
    if args.tasks:
        # Fewer, larger tasks per micro-batch: each opens one consumer and one producer or
        # database transaction, which costs more than its share of 3,000 rows. A store's
        # orders live in one Kafka partition, which stays whole inside one task.
        orders = orders.coalesce(args.tasks)
    # No Spark aggregation state: every order adds its amount and a count of one to its
    # store's row, so the database alone holds the totals (and survives a lost checkpoint).
    revenue = started(
        orders.select("store", F.col("amount").alias("revenue"), F.lit(1).alias("orders"))
        .writeStream.format("onceflow-database")
        .option("url", args.database_url)
        .option("table", "store_revenue")
        .option("mode", "accumulate")
        .option("keyColumns", "store")
        .option("sinkId", "orders-revenue"),
        args,
        "store_revenue",
        "revenue",
    )
    confirmations = started(
        confirmed(orders)
        .writeStream.format("onceflow-kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", "order-confirmations")
        .option("sinkId", "order-confirmations"),
        args,
        "order_confirmations",
        "confirmations",
    )
    return [revenue, confirmations]


def started(writer, args: argparse.Namespace, name: str, checkpoint: str):
    """Start query ``name`` with the job's trigger and its checkpoint in folder
    ``checkpoint`` of the job's checkpoint directory."""
    return (
        writer.option("checkpointLocation", f"{args.checkpoint_dir}/{checkpoint}")
        .trigger(processingTime=args.trigger)
        .queryName(name)
        .start()
    )


def confirmed(orders):
    """One confirmation event per order, keyed by its store."""
    return orders.select(
        F.col("store").alias("key"),
        F.to_json(
            F.struct("order_id", "store", "amount", "ts", F.lit("confirmed").alias("status"))
        ).alias("value"),
    )


def job_arguments(description: str) -> argparse.ArgumentParser:
    """The job's command line: where its input, outputs and checkpoints are, and its pace."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5000)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", type=int, default=0, help="Tasks per micro-batch (default: one per partition)."
    )
    args = parser.parse_args(argv)

    # Python workers (executors, and the driver's data source planners) run this
    # interpreter, which has onceflow, unless told otherwise; on a cluster every node
    # needs onceflow installed at that path.
    spark = local_session(
        "onceflow-orders",
        master=args.master,
        shuffle_partitions=4,
        loopback=False,
        python=os.environ.get("PYSPARK_PYTHON"),
    )
    run(spark, build_queries(spark, args))


def run(spark: SparkSession, queries: list) -> None:
    """Report each micro-batch on stdout until a query fails (exit 1) or SIGTERM comes."""
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    print("pipeline started", flush=True)
    names = [query.name for query in queries]
    seen: dict[str, tuple[int, str]] = {}  # query name -> its last update's batch and time
    try:
        while all(query.isActive for query in queries) and not stopping.is_set():
            for name, query in zip(names, queries, strict=True):
                for progress in new_progress(query, seen.get(name, (-1, ""))):
                    seen[name] = (progress["batchId"], progress["timestamp"])
                    if progress["numInputRows"]:
                        print("progress", json.dumps(batch_summary(name, progress)))
            sys.stdout.flush()
            stopping.wait(0.2)
        for query in queries:
            if query.exception() is not None:
                print(f"query {query.name} failed: {query.exception()}", file=sys.stderr)
                print(f"failed {query.name}: {reason(str(query.exception()))}", flush=True)
                sys.exit(1)
    except KeyboardInterrupt:
        pass
    finally:
        for query in queries:
            query.stop()
        spark.stop()


def new_progress(query, seen: tuple[int, str]) -> list:
    """The query's progress updates after the one ``seen`` (its batch id and timestamp),
    oldest first.

    ``lastProgress`` is one py4j call; ``recentProgress`` turns up to 100 updates into Python
    objects, which polled five times a second cost the driver more than its queries' own
    planning. It is asked only when more than one batch ended since the last look. (An
    update without data, every 10 s of an idle query, has the next batch's id.)
    """
    last_batch, last_time = seen
    last = query.lastProgress
    if last is None or last["timestamp"] <= last_time:
        return []
    if last["batchId"] <= last_batch + 1:
        return [last]
    return [p for p in query.recentProgress if p["timestamp"] > last_time]


def reason(error: str) -> str:
    """The line of a query's error that says why: onceflow's own error (the source's and
    sinks' errors are one line each), else the first line of Spark's."""
    lines = error.splitlines() or [""]
    for line in lines:
        for marker in ("KafkaUnavailableError: ", "OnceflowDataLossError: ", "SinkReusedError: "):
            if marker in line:
                return line[line.index(marker) :]
    return lines[0]


def batch_summary(name: str, progress) -> dict:
    """One line per micro-batch for the demo: size, time, and how far behind the source is."""
    behind = [
        int(source_metrics(source).get("maxOffsetsBehindLatest", 0))
        for source in onceflow_sources(progress)
    ] + [  # Spark's own Kafka source reports the same metric (benchmarks' anchor)
        int(float(source["metrics"]["maxOffsetsBehindLatest"]))
        for source in progress.get("sources") or []
        if "maxOffsetsBehindLatest" in (source.get("metrics") or {})
    ]
    return {
        "query": name,
        "batch": progress["batchId"],
        "rows": progress["numInputRows"],
        "ms": progress["durationMs"].get("triggerExecution", 0),
        "behind": max(behind, default=0),
        "timestamp": progress["timestamp"],
        "durations": dict(progress["durationMs"]),
    }


if __name__ == "__main__":
    main()
