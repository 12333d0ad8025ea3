"""A user's script, as docs/spark.md writes one: the onceflow source into the database
sink with ``trigger(availableNow=True)`` and ``awaitTermination()``, and no
``spark.stop()`` at the end (as many scripts end).

python tests/spark/script_without_stop.py BOOTSTRAP TOPIC DATABASE_URL CHECKPOINT
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

import onceflow.spark

bootstrap, topic, url, checkpoint = sys.argv[1:5]

spark = SparkSession.builder.master("local[2]").getOrCreate()
onceflow.spark.register(spark)  # not spark.dataSource.register: see "Several queries"

ORDER = StructType(
    [
        StructField("order_id", StringType()),
        StructField("store", StringType()),
        StructField("amount", LongType()),
    ]
)
orders = (
    spark.readStream.format("onceflow")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", 10_000)
    .load()
    .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
    .select("order.*")
)
query = (
    orders.select("store", F.col("amount").alias("revenue"), F.lit(1).alias("orders"))
    .writeStream.format("onceflow-database")
    .option("url", url)
    .option("table", "store_revenue")
    .option("mode", "accumulate")
    .option("keyColumns", "store")
    .option("sinkId", "orders-revenue")
    .option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
