"""The onceflow demo: an exactly-once orders pipeline that survives a crash mid-batch.

1. starts the embedded broker (state in .demo/broker) and applies topics.yaml;
2. streams orders keyed by store into ``orders``;
3. runs the Spark pipeline (examples/orders/pipeline.py), SIGKILLs it in the middle of a
   micro-batch, and restarts it on the same checkpoints;
4. audits the outputs: every order confirmed exactly once and in per-store order, and the
   per-store revenue equal to the sum of the orders.

Defaults are embedded (onceflow broker, SQLite, Spark local[2]); --bootstrap,
--database-url and --master point the same job at Kafka, PostgreSQL and a Spark cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generator import generate  # noqa: E402

from onceflow.broker.process import BrokerProcess  # noqa: E402
from onceflow.verify.command import run_verify  # noqa: E402

console = Console()


def apply_topics(bootstrap: str) -> None:
    from onceflow import topics

    topics.migrate(HERE / "topics.yaml", bootstrap)


BATCHES = 10  # micro-batches a run takes at least, so the planned kill lands mid-run


def batch_size(orders: int) -> int:
    """maxOffsetsPerTrigger for ``orders``: at least BATCHES batches, at most 5,000 orders each.

    Spark runs a micro-batch only when new orders arrived, so with one big batch a small
    run (``--orders 3000``) was over before batch ``--kill-after-batch`` and nothing was
    killed. With at least BATCHES batches the kill after batch 2 always lands mid-run.
    """
    return max(1, min(5_000, orders // BATCHES))


class Pipeline:
    """The Spark job as a process group, so SIGKILL takes the JVM down with the driver."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, log_path: Path) -> None:
        self.command = [
            sys.executable,
            str(HERE / "pipeline.py"),
            "--bootstrap",
            bootstrap,
            "--database-url",
            args.database_url,
            "--checkpoint-dir",
            str(args.state / "checkpoints"),
            "--master",
            args.master,
            "--max-offsets-per-trigger",
            str(batch_size(args.orders)),
        ]
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self.batches: dict[str, int] = defaultdict(lambda: -1)
        self.batch_started = threading.Event()

    def start(self) -> None:
        self.batches.clear()
        log = open(self.log_path, "a")  # noqa: SIM115  (owned by the child process)
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "batch":
                self.batches[parts[1]] = int(parts[2])
                if int(parts[3]) > 0:
                    self.batch_started.set()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def failed(self) -> bool:
        return self.process is not None and self.process.poll() not in (None, 0, -15)


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


def expected_revenue(bootstrap: str, count: int) -> dict[str, tuple[int, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "demo-audit",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
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


def confirmed_count(consumer: Consumer) -> int:
    return sum(1 for m in consumer.consume(5000, 0.2) if m.error() is None)


def run(args: argparse.Namespace) -> int:
    state: Path = args.state
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = BrokerProcess(state / "broker", log_path=state / "broker.log").start()
        bootstrap = broker.bootstrap
        console.print(f"[bold]broker[/bold] onceflow on {bootstrap} (data in {state}/broker)")
    pipeline = Pipeline(args, bootstrap, state / "pipeline.log")
    try:
        apply_topics(bootstrap)
        console.print("[bold]topics[/bold] applied examples/orders/topics.yaml")
        generated = [0]
        generator = threading.Thread(
            target=generate,
            args=(bootstrap, "orders", args.orders, args.rate),
            kwargs={"progress": lambda n: generated.__setitem__(0, n)},
            daemon=True,
        )
        started = time.monotonic()
        generator.start()
        pipeline.start()
        confirmations = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "demo-progress",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        confirmations.subscribe(["order-confirmations"])
        confirmed = 0
        killed = False
        with Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(),
            TextColumn("{task.completed:>7}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bars = {
                name: progress.add_task(name, total=args.orders)
                for name in ("orders produced", "revenue (orders counted)", "confirmations")
            }
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                counted = sum(o for _, o in revenue_totals(args.database_url).values())
                confirmed += confirmed_count(confirmations)
                progress.update(bars["orders produced"], completed=generated[0])
                progress.update(bars["revenue (orders counted)"], completed=counted)
                progress.update(bars["confirmations"], completed=confirmed)
                if not killed and pipeline.batches["store_revenue"] >= args.kill_after_batch:
                    pipeline.batch_started.clear()
                    pipeline.batch_started.wait(10)
                    time.sleep(0.3)  # inside the next micro-batch
                    pipeline.kill()
                    killed = True
                    progress.console.print(
                        "[bold red]SIGKILL[/bold red] Spark job killed in the middle of a "
                        "micro-batch; restarting it on the same checkpoints"
                    )
                    pipeline.start()
                if pipeline.failed:
                    console.print(f"[red]pipeline failed; see {pipeline.log_path}[/red]")
                    return 1
                if counted >= args.orders and confirmed >= args.orders:
                    break
        elapsed = time.monotonic() - started
        confirmations.close()
        pipeline.stop()
        return audit(args, bootstrap, elapsed, killed)
    finally:
        pipeline.stop()
        if broker is not None:
            broker.stop()


def audit(args: argparse.Namespace, bootstrap: str, elapsed: float, killed: bool) -> int:
    report = run_verify(
        bootstrap,
        "orders",
        id_field="order_id",
        key_field="store",
        output_topic="order-confirmations",
    )
    expected = expected_revenue(bootstrap, args.orders)
    stored = revenue_totals(args.database_url)
    wrong_stores = sorted(
        s for s in expected.keys() | stored.keys() if expected.get(s) != stored.get(s)
    )
    counts = report.counts
    table = Table(title="onceflow demo audit", show_lines=False)
    table.add_column("check")
    table.add_column("value", justify="right")
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
        ("Spark job SIGKILLed mid-batch", "yes" if killed else "no"),
        ("throughput (orders/s, end to end)", f"{args.orders / elapsed:,.0f}"),
    ]
    for check, value in rows:
        table.add_row(check, value)
    console.print(table)
    if not killed:
        console.print(
            f"[bold red]the job finished before batch {args.kill_after_batch}, so it was never "
            "killed and recovery was not tested; use a smaller --kill-after-batch[/bold red]"
        )
    anomalies = not report.ok or bool(wrong_stores)
    if anomalies:
        console.print("[bold red]anomalies found[/bold red]")
        report_path = args.state / "audit.json"
        report_path.write_text(report.to_json())
        console.print(f"details in {report_path}")
    elif killed:
        console.print("[bold green]exactly-once: no anomalies[/bold green]")
    return 0 if killed and not anomalies else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="A Kafka cluster (default: embedded broker).")
    parser.add_argument("--database-url", help="Default: sqlite:///.demo/onceflow.db")
    parser.add_argument("--master", default="local[2]", help="Spark master URL.")
    parser.add_argument("--state", type=Path, default=Path(".demo"))
    parser.add_argument("--orders", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=3_000, help="Orders per second.")
    parser.add_argument("--kill-after-batch", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args(argv)
    args.state = args.state.resolve()
    if args.database_url is None:
        args.database_url = f"sqlite:///{args.state / 'onceflow.db'}"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
