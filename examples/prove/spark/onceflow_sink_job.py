"""Correct Spark job: the onceflow-database sink commits each micro-batch's rows together
with the batch's source offsets in one database transaction, so a replayed batch is a
no-op.

    onceflow prove spark onceflow_sink_job.py --output table:orders --schema schema.sql
"""

import os

from pyspark.sql import functions as F

from onceflow.spark.session import local_session

EVENT = "id STRING, key STRING, seq LONG"

spark = local_session("onceflow-sink")
events = (
    spark.readStream.format("onceflow")
    .option("kafka.bootstrap.servers", os.environ["ONCEFLOW_BOOTSTRAP"])
    .option("subscribe", os.environ["ONCEFLOW_INPUT_TOPIC"])
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "20")
    .load()
    .select(F.from_json(F.col("value").cast("string"), EVENT).alias("e"))
    .select("e.*")
)
query = (
    events.writeStream.format("onceflow-database")
    .option("url", os.environ["ONCEFLOW_DATABASE_URL"])
    .option("table", "orders")
    .option("mode", "append")
    .option("sinkId", "orders")
    .option("checkpointLocation", os.environ["ONCEFLOW_PROVE_CHECKPOINT"])
    .trigger(processingTime="200 milliseconds")
    .start()
)
query.awaitTermination()
