"""The orders demo's audit: every order confirmed exactly once and in per-store order (by
``onceflow verify``), the per-store revenue equal to the sum of the orders, and the run's
rates and latencies, as one table."""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from demo_job import Pipeline, Timeline, backlog_rate
from rich.console import Console
from rich.table import Table

from onceflow.verify.run import run_verify

console = Console()


def revenue_totals(database_url: str) -> dict[str, tuple[int, int]]:
    if not database_url.startswith("sqlite:///"):
        import psycopg

        with psycopg.connect(database_url) as connection:
            rows = connection.execute("SELECT store, revenue, orders FROM store_revenue").fetchall()
        return {store: (int(revenue), int(orders)) for store, revenue, orders in rows}
    path = database_url.removeprefix("sqlite:///")
    if not Path(path).exists():
        return {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = connection.execute("SELECT store, revenue, orders FROM store_revenue").fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        connection.close()
    return {store: (int(revenue), int(orders)) for store, revenue, orders in rows}


def expected_revenue(
    bootstrap: str, count: int, logger: logging.Logger | None = None
) -> dict[str, tuple[int, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "demo-audit",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        },
        **({"logger": logger} if logger is not None else {}),
    )
    metadata = consumer.list_topics("orders", timeout=10)
    consumer.assign([TopicPartition("orders", p, 0) for p in metadata.topics["orders"].partitions])
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        for message in consumer.consume(2000, 0.5):
            if message.error() is None:
                order = json.loads(message.value())
                totals[order["store"]][0] += order["amount"]
                totals[order["store"]][1] += 1
                seen += 1
    consumer.close()
    return {store: (revenue, orders) for store, (revenue, orders) in totals.items()}


class Confirmations:
    """Reads order-confirmations (read_committed) and times each order end to end."""

    def __init__(self, bootstrap: str, logger: logging.Logger | None = None) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "demo-progress",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            },
            **({"logger": logger} if logger is not None else {}),
        )
        self.consumer.subscribe(["order-confirmations"])
        self.count = 0
        self.latencies: list[tuple[int, int]] = []  # (order created ms, latency ms)

    def poll(self, timeout: float = 0.2) -> None:
        messages = self.consumer.consume(5000, timeout)
        now_ms = int(time.time() * 1000)
        for message in messages:
            if message.error() is None:
                self.count += 1
                created = json.loads(message.value()).get("ts")
                if isinstance(created, int):
                    self.latencies.append((created, now_ms - created))

    def close(self) -> None:
        self.consumer.close()


def percentile(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def audit(
    args: argparse.Namespace,
    bootstrap: str,
    pipeline: Pipeline,
    confirmations: Confirmations,
    timeline: Timeline,
    kafka_logs: logging.Logger | None = None,
) -> int:
    killed = timeline.killed_at is not None
    report = run_verify(
        bootstrap,
        "orders",
        id_field="order_id",
        key_field="store",
        output_topic="order-confirmations",
    )
    expected = expected_revenue(bootstrap, args.orders, kafka_logs)
    stored = revenue_totals(args.database_url)
    wrong_stores = sorted(
        s for s in expected.keys() | stored.keys() if expected.get(s) != stored.get(s)
    )
    counts = report.counts
    table = Table(title="onceflow demo audit", show_lines=False)
    table.add_column("check")
    table.add_column("value", justify="right")
    generator_s = max(timeline.generator_finished - timeline.generator_started, 1e-9)
    # outside the kill window: orders confirmed before the kill (an order created before
    # it but confirmed after the restart waited for the recovery, counted below)
    before_kill = [
        latency
        for created, latency in confirmations.latencies
        if timeline.killed_at is None or created + latency < timeline.killed_at * 1000
    ]
    rows = [
        ("orders in", str(sum(o for _, o in expected.values()))),
        ("revenue rows (stores)", str(len(stored))),
        (
            "revenue total (expected / stored)",
            f"{sum(r for r, _ in expected.values())} / {sum(r for r, _ in stored.values())}",
        ),
        ("stores with wrong revenue", str(len(wrong_stores))),
        ("confirmations out", str(report.sinks[0].records if report.sinks else 0)),
        ("duplicates", str(counts.get("duplicated", 0))),
        ("missing", str(counts.get("missing", 0))),
        ("out of order (per store)", str(counts.get("reordered", 0))),
        ("aborted data visible", str(counts.get("aborted_visible", 0))),
        (
            "Spark job SIGKILLed mid-batch",
            "yes" if killed and timeline.unfinished_batch is not None else "no",
        ),
        ("generator rate (orders/s)", f"{args.orders / generator_s:,.0f}"),
        (
            "pipeline rate with a backlog (orders/s)",
            f"{backlog_rate(pipeline, 'store_revenue')} revenue, "
            f"{backlog_rate(pipeline, 'order_confirmations')} confirmations",
        ),
        (
            "end-to-end latency p50 / p99 (ms)",
            f"{percentile(before_kill, 0.5):,} / {percentile(before_kill, 0.99):,}"
            if before_kill
            else "n/a",
        ),
        (
            "kill to caught up again (s)",
            f"{timeline.caught_up_after_kill:.1f}"
            if timeline.caught_up_after_kill is not None
            else "n/a",
        ),
    ]
    for check, value in rows:
        table.add_row(check, value)
    console.print(table)
    console.print(
        "latency: order created to confirmation read (read_committed), orders confirmed "
        "before the kill; rates: micro-batches that started with orders waiting"
    )
    if not killed or timeline.unfinished_batch is None:
        console.print(
            "[bold red]the job was not killed inside a micro-batch, so recovery from a "
            "mid-batch crash was not tested[/bold red]"
        )
    anomalies = not report.ok or bool(wrong_stores)
    if anomalies:
        console.print("[bold red]anomalies found[/bold red]")
        report_path = args.state / "audit.json"
        report_path.write_text(report.to_json())
        console.print(f"details in {report_path}")
    elif killed:
        console.print("[bold green]exactly-once: no anomalies[/bold green]")
    return 0 if killed and timeline.unfinished_batch is not None and not anomalies else 1
