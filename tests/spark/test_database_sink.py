"""The onceflow-database sink in the shared SparkSession: modes, replays, resume."""

from __future__ import annotations

import os

import pytest

from onceflow.spark import database_offsets
from tests.spark.sink_helpers import expected_totals, make_orders, orders_stream, sqlite_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def run_revenue(spark, bootstrap, topic, url, checkpoint, starting="earliest", mode="accumulate"):
    from pyspark.sql import functions as F

    frame = orders_stream(spark, bootstrap, topic, starting, maxOffsetsPerTrigger=40)
    if mode == "append":
        frame = frame.select("order_id", "store", "amount")
        keys = None
    else:
        frame = frame.select("store", F.col("amount").alias("revenue"), F.lit(1).alias("orders"))
        keys = "store"
    writer = (
        frame.writeStream.format("onceflow-database")
        .option("url", url)
        .option("table", "store_revenue" if mode != "append" else "orders_out")
        .option("mode", mode)
        .option("sinkId", f"{topic}-{mode}")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    if keys:
        writer = writer.option("keyColumns", keys)
    query = writer.start()
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return query


def forget_commit(checkpoint, batch_id: int) -> None:
    """Remove Spark's commit record of a batch: the next start runs that batch again."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        path = checkpoint / "commits" / name
        if path.exists():
            os.remove(path)


def totals(path: str) -> dict[str, tuple[int, int]]:
    rows = sqlite_rows(path, "SELECT store, revenue, orders FROM store_revenue")
    return {store: (revenue, count) for store, revenue, count in rows}


def test_accumulate_replayed_batch_and_deleted_checkpoint(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    db = str(tmp_path / "out.db")
    url = f"sqlite:///{db}"
    orders = make_orders(bootstrap, topic, 100)
    checkpoint = tmp_path / "cp"
    run_revenue(spark, bootstrap, topic, url, checkpoint)
    assert totals(db) == expected_totals(orders)
    stored = database_offsets(url, f"{topic}-accumulate")
    assert stored is not None and sum(v for p in eval(stored).values() for v in p.values()) == 100

    # A replayed batch id: forget Spark's commit of the last batch, so it runs it again.
    commits = sorted(int(n) for n in os.listdir(checkpoint / "commits") if n.isdigit())
    forget_commit(checkpoint, commits[-1])
    run_revenue(spark, bootstrap, topic, url, checkpoint)
    assert totals(db) == expected_totals(orders)

    # Deleted checkpoint, same data from earliest: every batch is at or below the stored
    # offsets, so every batch is a no-op.
    run_revenue(spark, bootstrap, topic, url, tmp_path / "cp2")
    assert totals(db) == expected_totals(orders)

    # Deleted checkpoint, new data, resume from the database's offsets: no reprocessing.
    more = make_orders(bootstrap, topic, 50, first=100)
    run_revenue(
        spark,
        bootstrap,
        topic,
        url,
        tmp_path / "cp3",
        starting=database_offsets(url, f"{topic}-accumulate"),
    )
    assert totals(db) == expected_totals(orders + more)
    staged = sqlite_rows(db, "SELECT COUNT(*) FROM store_revenue_onceflow_stage")
    assert staged == [(0,)]
