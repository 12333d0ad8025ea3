"""One streaming query from an orders topic into an onceflow sink, run as a subprocess.

The sink chaos tests run it twice on the same checkpoint: first with a crash point armed
(``ONCEFLOW_SPARK_CRASH_AT``, see ``onceflow.spark.crash``), which SIGKILLs this whole
process group (the Python driver and its JVM), then without, to finish the input.

python tests/spark/sink_job.py --bootstrap H:P --topic T --checkpoint DIR
    (--database-url URL [--mode append[,accumulate]] [--strategy direct] | --output-topic OUT)
    --sink-id ID

With several modes, one query per mode runs in the same session (sink ids
``<ID>-<mode>``, checkpoints under ``DIR/<sink id>``): a crash point takes down both.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink-id", required=True)
    parser.add_argument("--database-url")
    parser.add_argument("--mode", default="append")
    parser.add_argument("--strategy", default="direct")
    parser.add_argument("--output-topic")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", default="40")
    args = parser.parse_args()

    from onceflow.spark import crash

    if os.environ.get(crash.ENV_VAR):
        os.environ[crash.PGID_VAR] = str(os.getpgrp())  # inherited by the JVM and workers
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import onceflow.spark
    from tests.spark.sink_helpers import orders_stream

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("onceflow-sink-job")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    onceflow.spark.register(spark)
    orders = orders_stream(
        spark,
        args.bootstrap,
        args.topic,
        args.starting_offsets,
        maxOffsetsPerTrigger=args.max_offsets_per_trigger,
    )
    writers = []
    if args.database_url:
        for mode in args.mode.split(","):  # one query per mode, each with its own checkpoint
            if mode == "append":
                frame = orders
            else:
                frame = orders.select(
                    "store", F.col("amount").alias("revenue"), F.lit(1).alias("orders")
                )
            writer = (
                frame.writeStream.format("onceflow-database")
                .option("url", args.database_url)
                .option("table", "orders_out" if mode == "append" else "store_revenue")
                .option("mode", mode)
                .option("strategy", args.strategy)
            )
            if mode != "append":
                writer = writer.option("keyColumns", "store")
            writers.append((f"{args.sink_id}-{mode}", writer))
    else:
        writer = (
            orders.select(
                F.col("store").alias("key"),
                F.to_json(F.struct("order_id", "store", "amount")).alias("value"),
            )
            .writeStream.format("onceflow-kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.output_topic)
        )
        writers.append((args.sink_id, writer))
    queries = [
        writer.option("sinkId", sink_id)
        .option("checkpointLocation", os.path.join(args.checkpoint, sink_id))
        .trigger(availableNow=True)
        .start()
        for sink_id, writer in writers
    ]
    for query in queries:
        query.awaitTermination()
        print(f"done batches={query.lastProgress['batchId'] if query.lastProgress else None}")
    spark.stop()


if __name__ == "__main__":
    main()
