"""One streaming query from an orders topic into an onceflow sink, run as a subprocess.

The sink chaos tests run it twice on the same checkpoint: first with a crash point armed
(``ONCEFLOW_SPARK_CRASH_AT``, see ``onceflow.crash_points``), which SIGKILLs this whole
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

    from onceflow.crash_points import crash_whole_process_group
    from onceflow.spark.session import local_session
    from tests.spark.sink_helpers import confirmation_records, orders_stream, revenue_rows

    crash_whole_process_group()
    spark = local_session("onceflow-sink-job")
    scratch = spark.conf.get("spark.local.dir")
    print(f"scratch {scratch}", flush=True)
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
            frame = orders if mode == "append" else revenue_rows(orders)
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
            confirmation_records(orders)
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
    temporary = spark.sparkContext._jvm.System.getProperty("java.io.tmpdir")
    print(f"scratch holds {sorted(os.listdir(scratch))} java.io.tmpdir={temporary}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
