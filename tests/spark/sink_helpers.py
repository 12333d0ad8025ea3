"""Helpers for the sink tests: an orders input topic and the queries that read it."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from tests.spark.conftest import create_topic, produce

STORES = ["s1", "s2", "s3", "s4", "s5"]
ORDER_SCHEMA = "order_id STRING, store STRING, amount LONG"


def make_orders(bootstrap: str, topic: str, count: int, partitions: int = 2, first: int = 0):
    """``count`` orders keyed by store; returns their dicts. Creates the topic if first=0."""
    if first == 0:
        create_topic(bootstrap, topic, partitions=partitions)
    orders = []
    by_partition: dict[int, list[bytes]] = {}
    for i in range(first, first + count):
        store = STORES[i % len(STORES)]
        order = {"order_id": f"o{i}", "store": store, "amount": i % 7 + 1}
        orders.append(order)
        by_partition.setdefault(STORES.index(store) % partitions, []).append(
            json.dumps(order).encode()
        )
    for partition, values in by_partition.items():
        produce(bootstrap, topic, values, partition=partition)
    return orders


def orders_stream(spark: Any, bootstrap: str, topic: str, starting: str = "earliest", **opts):
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting)
    )
    for key, value in opts.items():
        reader = reader.option(key, str(value))
    return (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
        .select("o.*")
    )


def revenue_rows(orders: Any) -> Any:
    """(store, revenue, orders): one row per order, for an accumulate sink by store."""
    from pyspark.sql import functions as F

    return orders.select("store", F.col("amount").alias("revenue"), F.lit(1).alias("orders"))


def confirmation_records(orders: Any) -> Any:
    """(key, value): one Kafka record per order, keyed by store, for the Kafka sink."""
    from pyspark.sql import functions as F

    return orders.select(
        F.col("store").alias("key"),
        F.to_json(F.struct("order_id", "store", "amount")).alias("value"),
    )


def expected_totals(orders: list[dict]) -> dict[str, tuple[int, int]]:
    totals: dict[str, tuple[int, int]] = {}
    for order in orders:
        revenue, count = totals.get(order["store"], (0, 0))
        totals[order["store"]] = (revenue + order["amount"], count + 1)
    return totals


def sqlite_rows(path: str, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def database_rows(url: str, sql: str) -> list[tuple]:
    from onceflow.db import Database

    with Database(url) as db:
        return [tuple(row) for row in db.execute(sql).fetchall()]


def assert_append_and_accumulate_exact(
    bootstrap: str, topic: str, url: str, orders: list[dict]
) -> None:
    """After an ``append,accumulate`` job: every order once in ``orders_out`` (audited by
    ``onceflow verify``) and the per-store totals in ``store_revenue``."""
    from onceflow.verify.run import run_verify

    report = run_verify(
        bootstrap, topic, id_field="order_id", key_field="store", database_url=url,
        table="orders_out", timeout=30,
    )  # fmt: skip
    assert report.ok, report.to_json()
    assert report.sinks[0].records == len(orders)
    rows = database_rows(url, "SELECT store, revenue, orders FROM store_revenue")
    assert {store: (revenue, count) for store, revenue, count in rows} == expected_totals(orders)
