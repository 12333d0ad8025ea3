"""The onceflow-database sink in the shared SparkSession: modes, replays, resume."""

from __future__ import annotations

import os

import pytest

from onceflow.spark import database_offsets
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.spark.sink_helpers import (
    expected_totals,
    make_orders,
    orders_stream,
    revenue_rows,
    sqlite_rows,
)

pytestmark = [pytest.mark.spark]


def run_revenue(spark, bootstrap, topic, url, checkpoint, starting="earliest", mode="accumulate"):

    frame = orders_stream(spark, bootstrap, topic, starting, maxOffsetsPerTrigger=40)
    if mode == "append":
        frame = frame.select("order_id", "store", "amount")
        keys = None
    else:
        frame = revenue_rows(frame)
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


def _rows(url: str, sql: str) -> list[tuple]:
    from onceflow.db import Database

    db = Database(url)
    try:
        return [tuple(row) for row in db.execute(sql).fetchall()]
    finally:
        db.close()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_upsert_and_append_modes(request, spark, kafka_broker, topic, tmp_path, database):
    from pyspark.sql import functions as F

    if database == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite:///{tmp_path / 'out.db'}"
    bootstrap = kafka_broker.bootstrap
    orders = make_orders(bootstrap, topic, 60)
    frame = orders_stream(spark, bootstrap, topic, maxOffsetsPerTrigger=25)
    queries = []
    for mode, table, keys, columns in (
        ("upsert", "last_order", "store", [F.col("store"), F.col("order_id")]),
        ("append", "all_orders", None, [F.col("order_id"), F.col("amount")]),
    ):
        writer = (
            frame.select(*columns)
            .writeStream.format("onceflow-database")
            .option("url", url)
            .option("table", table)
            .option("mode", mode)
            .option("sinkId", f"{topic}-{mode}")
            .option("checkpointLocation", str(tmp_path / mode))
            .trigger(availableNow=True)
        )
        if keys:
            writer = writer.option("keyColumns", keys)
        queries.append(writer.start())
    for query in queries:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
    # Upsert: the last order of each store (orders of a store are in one input partition).
    last = {}
    for order in orders:
        last[order["store"]] = order["order_id"]
    assert dict(_rows(url, "SELECT store, order_id FROM last_order")) == last
    appended = _rows(url, "SELECT order_id, amount FROM all_orders")
    assert sorted(appended) == sorted((o["order_id"], o["amount"]) for o in orders)


def test_batch_write_and_overwrite(spark, tmp_path):
    url = f"sqlite:///{tmp_path / 'batch.db'}"
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k STRING, v LONG")
    df.write.format("onceflow-database").option("url", url).option("table", "t").option(
        "mode", "accumulate"
    ).option("keyColumns", "k").mode("append").save()
    assert sorted(_rows(url, "SELECT k, v FROM t")) == [("a", 4), ("b", 2)]
    df.write.format("onceflow-database").option("url", url).option("table", "u").mode(
        "append"
    ).save()
    df.limit(1).write.format("onceflow-database").option("url", url).option("table", "u").mode(
        "overwrite"
    ).save()
    assert len(_rows(url, "SELECT k, v FROM u")) == 1
    assert _rows(url, "SELECT COUNT(*) FROM u_onceflow_stage") == [(0,)]


def test_straddling_batch_is_refused(spark, kafka_broker, topic, tmp_path):
    """A new checkpoint that starts below the database's offsets and would re-apply some of
    them fails instead of writing duplicates."""
    bootstrap = kafka_broker.bootstrap
    url = f"sqlite:///{tmp_path / 'out.db'}"
    make_orders(bootstrap, topic, 50, partitions=1)
    run_revenue(spark, bootstrap, topic, url, tmp_path / "cp")  # [0, 40), [40, 50)
    make_orders(bootstrap, topic, 30, partitions=1, first=50)
    # From earliest, batches of 40: [0, 40) is a no-op, [40, 80) straddles the stored 50.
    with pytest.raises(Exception, match="already holds results up to 50"):
        run_revenue(spark, bootstrap, topic, url, tmp_path / "cp2")
