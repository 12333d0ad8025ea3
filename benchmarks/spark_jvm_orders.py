"""The orders pipeline (examples/orders/pipeline.py) on Spark's own JVM Kafka connector:
the anchor benchmarks/spark_latency.py measures onceflow against.

The same two queries on the same input, with the same options and the same output lines
("pipeline started", "progress {...}"), written the way a Spark user writes them without
onceflow: ``format("kafka")`` reads the orders (read_committed); the per-store revenue is
added to SQLite by a ``foreachBatch`` that aggregates the batch and upserts the totals;
the confirmations go to Spark's Kafka sink. Neither sink is exactly-once (a replayed batch
is added or written again); they do the same work per order.

Run (in the virtualenv with Spark's connector): python benchmarks/spark_jvm_orders.py
    --bootstrap HOST:PORT --database-url sqlite:///PATH --checkpoint-dir DIR --jars DIR
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "orders"))

import pipeline  # noqa: E402  (the onceflow pipeline: arguments, schema, events, run loop)

from onceflow.spark.session import local_session  # noqa: E402

TABLE = """CREATE TABLE IF NOT EXISTS store_revenue
           (store TEXT PRIMARY KEY, revenue INTEGER NOT NULL, orders INTEGER NOT NULL)"""
ADD = """INSERT INTO store_revenue (store, revenue, orders) VALUES (?, ?, ?)
         ON CONFLICT (store) DO UPDATE SET revenue = revenue + excluded.revenue,
         orders = orders + excluded.orders"""


def build_queries(spark, args: argparse.Namespace) -> list:
    orders = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .select(F.from_json(F.col("value").cast("string"), pipeline.ORDER).alias("order"))
        .select("order.*")
    )
    path = args.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute(TABLE)

    def add_batch(batch, _batch_id: int) -> None:
        totals = batch.groupBy("store").agg(F.sum("amount"), F.count("*")).collect()
        with sqlite3.connect(path, timeout=30) as db:
            db.executemany(ADD, [tuple(row) for row in totals])

    revenue = pipeline.started(
        orders.writeStream.foreachBatch(add_batch), args, "store_revenue", "revenue"
    )
    confirmations = pipeline.started(
        pipeline.confirmed(orders)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", "order-confirmations"),
        args,
        "order_confirmations",
        "confirmations",
    )
    return [revenue, confirmations]


def main() -> None:
    parser = pipeline.job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--jars", type=Path, default=Path(sys.prefix) / "connector-jars")
    args = parser.parse_args()
    jars = ",".join(str(jar) for jar in sorted(args.jars.glob("*.jar")))
    spark = local_session(
        "jvm-orders",
        master=args.master,
        shuffle_partitions=4,
        loopback=False,
        config={"spark.jars": jars},
    )
    pipeline.run(spark, build_queries(spark, args))


if __name__ == "__main__":
    main()
