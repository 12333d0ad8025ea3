"""The Spark cells' job: events from the input topic into an exactly-once onceflow sink.

    python -m onceflow.chaos.spark_job --bootstrap H:P --input TOPIC --checkpoint DIR
        --sink-id ID (--database-url URL [--strategy direct|staged] | --output-topic TOPIC)
        [--max-offsets-per-trigger N]

Runs ``Trigger.AvailableNow`` on ``local[2]``: the whole input, then exit 0. With
``ONCEFLOW_SPARK_CRASH_AT`` set (see ``onceflow.crash_points``) the process group (Python
driver, JVM, Python workers) is SIGKILLed at that step, like a machine failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys

TABLE = "spark_entities"
TABLE_QUERY = f"SELECT event_id AS id, key FROM {TABLE}"
EVENT_SCHEMA = "id STRING, key STRING, n LONG"


def unavailable() -> str | None:
    """Why Spark cannot run here (no pyspark, no Java), or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'onceflow[spark]')"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "no Java (java on PATH or JAVA_HOME)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onceflow.chaos.spark_job")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink-id", required=True)
    parser.add_argument("--database-url")
    parser.add_argument("--strategy", choices=("direct", "staged"), default="direct")
    parser.add_argument("--output-topic")
    parser.add_argument("--max-offsets-per-trigger", default="10")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    if (args.database_url is None) == (args.output_topic is None):
        parser.error("give exactly one of --database-url and --output-topic")

    from pyspark.sql import functions as F

    from onceflow.crash_points import crash_whole_process_group
    from onceflow.spark.session import local_session

    crash_whole_process_group()
    spark = local_session("onceflow-chaos", master=args.master)
    events = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select(F.col("e.id").alias("event_id"), F.col("e.key").alias("key"), F.col("e.n"))
    )
    if args.database_url:
        writer = (
            events.writeStream.format("onceflow-database")
            .option("url", args.database_url)
            .option("table", TABLE)
            .option("mode", "append")
            .option("strategy", args.strategy)
        )
    else:
        writer = (
            events.select(
                F.col("key"),
                F.to_json(F.struct(F.col("event_id").alias("id"), "key", "n")).alias("value"),
            )
            .writeStream.format("onceflow-kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.output_topic)
        )
    query = (
        writer.option("sinkId", args.sink_id)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
