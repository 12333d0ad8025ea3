"""BROKEN Spark job: a foreachBatch sink that appends each micro-batch to SQLite without
recording the batch id. Spark commits a batch to its checkpoint only after the sink
returned: a kill in between replays the batch after the restart, and the rows are
appended again (duplicates).

    onceflow prove spark foreach_batch_append.py --output table:orders --schema schema.sql
"""

import os
import sqlite3

from pyspark.sql import functions as F

from onceflow.spark.session import local_session

EVENT = "id STRING, key STRING, seq LONG"


def append(batch, batch_id: int) -> None:
    rows = [(r.id, r.key, r.seq) for r in batch.collect()]
    with sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30) as db:
        db.executemany("INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)", rows)


spark = local_session("foreach-batch-append")
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
    events.writeStream.foreachBatch(append)
    .option("checkpointLocation", os.environ["ONCEFLOW_PROVE_CHECKPOINT"])
    .trigger(processingTime="200 milliseconds")
    .start()
)
query.awaitTermination()
