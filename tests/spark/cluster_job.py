"""The exactly-once job of the cluster test: one orders topic into both onceflow sinks.

Two streaming queries (``Trigger.AvailableNow``) read the same input: one appends every
order to a database table with ``onceflow-database``, the other writes a confirmation per
order to a Kafka topic with ``onceflow-kafka``. The driver runs here (client mode) against
the Spark master given with ``--master``; executors run wherever the master puts them.

Pause points (``ONCEFLOW_SPARK_PAUSE_*``, see ``onceflow.crash_points``) set in this
process's environment are passed on to the executors, so a test can stop a task in the
middle of a batch and kill its executor.

python tests/spark/cluster_job.py --master spark://H:P --bootstrap H:P --topic T
    --output-topic OUT --database-url URL --checkpoint-dir DIR --sink-prefix NAME
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--sink-prefix", required=True)
    parser.add_argument("--max-offsets-per-trigger", default="300")
    args = parser.parse_args()

    from onceflow.crash_points import SPARK_PAUSE_PREFIX
    from onceflow.spark.session import local_session
    from tests.kit.jvm import SHORT_LIVED_JVM_OPTIONS
    from tests.spark.sink_helpers import confirmation_records, orders_stream

    config = {
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.executor.defaultJavaOptions": SHORT_LIVED_JVM_OPTIONS,
        "spark.cores.max": "2",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join([f"{ROOT}/src", ROOT]),
    }
    for name, value in os.environ.items():
        if name.startswith(SPARK_PAUSE_PREFIX):
            config[f"spark.executorEnv.{name}"] = value
    spark = local_session(
        "onceflow-cluster-test", master=args.master, config=config, log_level="WARN"
    )

    orders = orders_stream(
        spark,
        args.bootstrap,
        args.topic,
        maxOffsetsPerTrigger=args.max_offsets_per_trigger,
    )
    to_database = (
        orders.writeStream.format("onceflow-database")
        .option("url", args.database_url)
        .option("table", "orders_out")
        .option("mode", "append")
        .option("sinkId", f"{args.sink_prefix}-db")
        .option("checkpointLocation", os.path.join(args.checkpoint_dir, "database"))
        .trigger(availableNow=True)
        .queryName("orders_to_database")
        .start()
    )
    to_kafka = (
        confirmation_records(orders)
        .writeStream.format("onceflow-kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output_topic)
        .option("sinkId", f"{args.sink_prefix}-kafka")
        .option("checkpointLocation", os.path.join(args.checkpoint_dir, "kafka"))
        .trigger(availableNow=True)
        .queryName("orders_to_kafka")
        .start()
    )
    for query in (to_database, to_kafka):
        query.awaitTermination()
        batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
        print(f"done {query.name} batches={batches}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
