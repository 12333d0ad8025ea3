"""The onceflow demo: an exactly-once orders pipeline that survives a crash mid-batch.

1. starts the embedded broker (state in .demo/broker) and applies topics.yaml;
2. streams orders keyed by store into ``orders``;
3. runs the Spark pipeline (examples/orders/pipeline.py), SIGKILLs it in the middle of a
   micro-batch, and restarts it on the same checkpoints;
4. audits the outputs: every order confirmed exactly once and in per-store order, and the
   per-store revenue equal to the sum of the orders.

Defaults are embedded (onceflow broker, SQLite, Spark local[2]); --bootstrap,
--database-url and --master point the same job at Kafka, PostgreSQL and a Spark cluster.
On a Kafka cluster, --environment production applies topics.yaml's production environment
(replication factor 3, min.insync.replicas 2), and --reset-topics starts from empty topics
when an earlier run left its records there.
"""

from __future__ import annotations

import argparse
import json
import logging
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

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generator import generate  # noqa: E402

from onceflow.broker.process import BrokerProcess  # noqa: E402
from onceflow.verify.run import run_verify  # noqa: E402

console = Console()
errors = Console(stderr=True, soft_wrap=True)

TOPICS_FILE = HERE / "topics.yaml"
INPUT, OUTPUT = "orders", "order-confirmations"
MARKER_TOPIC = "__onceflow_sink_markers.order-confirmations"  # the Kafka sink's markers


class DemoError(RuntimeError):
    """Why the demo cannot run: printed as one line."""


def fail(message: str) -> int:
    errors.print(f"[bold red]error:[/bold red] {escape(message)}")
    return 1


def client_logger(state: Path) -> logging.Logger:
    """librdkafka's log lines of the demo's own clients (generator, progress, audit) go to
    ``clients.log``: a broker that restarts is expected, not a reason for console noise."""
    logger = logging.getLogger("demo.kafka-clients")
    if not logger.handlers:
        handler = logging.FileHandler(state / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def apply_topics(bootstrap: str, env: str | None = None, reset: bool = False) -> str:
    """Create (or with ``reset``, delete and recreate) the demo's topics; the topics must
    hold no records of an earlier run (the audit compares every record). Returns the
    environment that was applied; raises DemoError with one line."""
    from onceflow import topics

    try:
        if reset:
            delete_marker_topic(bootstrap)
            plan = topics.run("reset", TOPICS_FILE, bootstrap, env=env, yes=True)
        else:
            plan = topics.migrate(TOPICS_FILE, bootstrap, env=env)
    except topics.SpecError as error:
        raise DemoError(
            "invalid topics file: " + "; ".join(str(problem) for problem in error.problems)
        ) from None
    except topics.TopicsError as error:  # PlanError (one line), LockTimeout, unreachable
        raise DemoError(str(error)) from None
    if not reset:
        leftovers = earlier_run(bootstrap)
        if leftovers:
            raise DemoError(
                f"{leftovers} on {bootstrap} (an earlier run of the demo?): its audit needs "
                f"empty topics; run it with --reset-topics to delete and recreate {INPUT}, "
                f"{OUTPUT} and {MARKER_TOPIC}"
            )
    return plan.env or "none"


def earlier_run(bootstrap: str) -> str | None:
    """What an earlier run left in the demo's topics, or None."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-check"})
    try:
        for name in (INPUT, OUTPUT):
            topic = metadata.topics.get(name)
            if topic is None:
                continue
            records = 0
            for partition in topic.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(name, partition), timeout=30, cached=False
                )
                records += high - low
            if records:
                return f"topic {name!r} holds {records:,} records"
    finally:
        consumer.close()
    if MARKER_TOPIC in metadata.topics:
        return f"topic {MARKER_TOPIC!r} exists"
    return None


def delete_marker_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if MARKER_TOPIC not in admin.list_topics(timeout=30).topics:
        return
    try:
        admin.delete_topics([MARKER_TOPIC])[MARKER_TOPIC].result(30)
    except KafkaException as error:
        raise DemoError(f"cannot delete {MARKER_TOPIC}: {error.args[0].str()}") from None
    deadline = time.monotonic() + 60
    while MARKER_TOPIC in admin.list_topics(timeout=30).topics:  # deletion is asynchronous
        if time.monotonic() > deadline:
            raise DemoError(f"{MARKER_TOPIC} is still there 60 s after its deletion")
        time.sleep(0.2)


BATCHES = 5  # micro-batches a run takes at least, so the planned kill lands mid-run


def batch_size(orders: int, rate: float) -> int:
    """maxOffsetsPerTrigger: at least BATCHES batches, and room to catch up at twice ``rate``.

    Spark runs a micro-batch only when new orders arrived, so with one big batch a small
    run (``--orders 3000``) was over before batch ``--kill-after-batch`` and nothing was
    killed. With at least BATCHES batches the kill after batch 2 always lands mid-run.
    Not more: a micro-batch of the two queries on local[2] costs 1.0-1.5 s whatever its
    size (planning, offset and commit logs, Python workers, the sinks' transactions), so
    10 batches of 3,000 orders ran at ~2,200 orders/s, behind the 3,000/s generator;
    batches of 6,000 run at 3,400-4,100/s.
    """
    return max(1, min(int(2 * rate), orders // BATCHES))


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
            str(args.batch_size or batch_size(args.orders, args.rate)),
        ]
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self.run = 0  # 1 for the first start, 2 after the restart
        self.batches: list[dict] = []  # every micro-batch's summary, in arrival order
        self.started = threading.Event()  # the queries are running
        self.failure: str | None = None  # the one-line reason a query failed

    def start(self) -> None:
        self.run += 1
        self.started.clear()
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
        threading.Thread(target=self._watch, args=(self.process, self.run), daemon=True).start()

    def _watch(self, process: subprocess.Popen[str], run: int) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "progress":
                self.batches.append({**json.loads(rest), "run": run})
            elif line.startswith("pipeline started"):
                self.started.set()
            elif kind == "failed":
                self.failure = rest

    def done_batches(self, query: str) -> int:
        return sum(1 for b in self.batches if b["query"] == query and b["run"] == self.run)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def failed(self) -> bool:
        return self.process is not None and self.process.poll() not in (None, 0, -15)


def unfinished_batch(checkpoint: Path) -> int | None:
    """The micro-batch Spark planned but never committed (what a mid-batch kill leaves)."""

    def numbers(folder: str) -> set[int]:
        path = checkpoint / folder
        return {int(f.name) for f in path.iterdir() if f.name.isdigit()} if path.exists() else set()

    planned = numbers("offsets")
    committed = numbers("commits")
    pending = planned - committed
    return max(pending) if pending else None


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

    def poll(self) -> None:
        messages = self.consumer.consume(5000, 0.2)
        now_ms = int(time.time() * 1000)
        for message in messages:
            if message.error() is None:
                self.count += 1
                created = json.loads(message.value()).get("ts")
                if isinstance(created, int):
                    self.latencies.append((created, now_ms - created))

    def close(self) -> None:
        self.consumer.close()


class Timeline:
    """When things happened during a run (a plain class: tests import this file by path)."""

    def __init__(self) -> None:
        self.generator_started = 0.0
        self.generator_finished = 0.0
        self.killed_at: float | None = None  # time.time() of the SIGKILL
        self.unfinished_batch: int | None = None  # the revenue batch the kill interrupted
        self.caught_up_after_kill: float | None = None  # seconds from the kill to no backlog


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
    timeline = Timeline()
    kafka_logs = client_logger(state)
    try:
        try:
            env = apply_topics(bootstrap, args.env, args.reset_topics)
        except DemoError as error:
            return fail(str(error))
        console.print(
            f"[bold]topics[/bold] {'reset' if args.reset_topics else 'applied'} "
            f"examples/orders/topics.yaml (environment: {env})"
        )
        pipeline.start()
        console.print(f"[bold]spark[/bold] starting the pipeline on {args.master} ...")
        while not pipeline.started.wait(0.5):
            if pipeline.failed:
                return pipeline_failed(pipeline)
        generated = [0]

        def produce_orders() -> None:
            timeline.generator_started = time.time()
            generate(
                bootstrap,
                "orders",
                args.orders,
                args.rate,
                progress=lambda n: generated.__setitem__(0, n),
                logger=kafka_logs,
            )
            timeline.generator_finished = time.time()

        threading.Thread(target=produce_orders, daemon=True).start()
        console.print(
            f"[bold]orders[/bold] {args.orders:,} at {args.rate:,.0f}/s; the Spark job will "
            f"be SIGKILLed during revenue batch {args.kill_after_batch} (the batch after "
            f"{args.kill_after_batch} finished ones) and restarted"
        )
        confirmations = Confirmations(bootstrap, kafka_logs)
        printed = 0
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
                confirmations.poll()
                progress.update(bars["orders produced"], completed=generated[0])
                progress.update(bars["revenue (orders counted)"], completed=counted)
                progress.update(bars["confirmations"], completed=confirmations.count)
                for batch in pipeline.batches[printed:]:
                    progress.console.print(
                        f"  batch {batch['batch']:>3} {batch['query']:<20}"
                        f"{batch['rows']:>7,} orders in {batch['ms']:>6,} ms, "
                        f"{batch['behind']:>6,} behind"
                    )
                printed = len(pipeline.batches)
                if (
                    timeline.killed_at is None
                    and pipeline.done_batches("store_revenue") >= args.kill_after_batch
                ):
                    kill_mid_batch(pipeline, args, timeline)
                    progress.console.print(
                        "[bold red]SIGKILL[/bold red] Spark job killed "
                        + (
                            f"during revenue batch {timeline.unfinished_batch} (planned, "
                            "not committed)"
                            if timeline.unfinished_batch is not None
                            else "between micro-batches"
                        )
                        + "; restarting it on the same checkpoints"
                    )
                    pipeline.start()
                if pipeline.failed:
                    return pipeline_failed(pipeline)
                if (
                    timeline.killed_at is not None
                    and timeline.caught_up_after_kill is None
                    and min(counted, confirmations.count) >= generated[0]
                ):
                    timeline.caught_up_after_kill = time.time() - timeline.killed_at
                if counted >= args.orders and confirmations.count >= args.orders:
                    break
        confirmations.close()
        pipeline.stop()
        return audit(args, bootstrap, pipeline, confirmations, timeline, kafka_logs)
    finally:
        pipeline.stop()
        if broker is not None:
            broker.stop()


def pipeline_failed(pipeline: Pipeline) -> int:
    """The Spark job ended with an error: its one-line reason, and where the rest is."""
    reason = pipeline.failure or f"exit code {pipeline.process.returncode}"  # type: ignore[union-attr]
    return fail(f"the pipeline failed: {reason} (its log: {pipeline.log_path})")


def kill_mid_batch(pipeline: Pipeline, args: argparse.Namespace, timeline: Timeline) -> None:
    """SIGKILL the job as soon as the revenue query has planned a micro-batch (written its
    offsets to the checkpoint) and not committed it yet: in the middle of that batch."""
    checkpoint = args.state / "checkpoints" / "revenue"
    deadline = time.monotonic() + 60
    while unfinished_batch(checkpoint) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    pipeline.kill()
    timeline.killed_at = time.time()
    timeline.unfinished_batch = unfinished_batch(checkpoint)


def backlog_rate(pipeline: Pipeline, query: str) -> str:
    """Orders/s of the query's micro-batches that started with more orders waiting."""
    busy = [b for b in pipeline.batches if b["query"] == query and b["behind"] > 0]
    milliseconds = sum(b["ms"] for b in busy)
    if not busy or milliseconds == 0:
        return "never behind"
    return f"{sum(b['rows'] for b in busy) * 1000 / milliseconds:,.0f}"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="A Kafka cluster (default: embedded broker).")
    parser.add_argument(
        "--environment",
        "--env",
        dest="env",
        default=os.environ.get("ONCEFLOW_ENV") or None,
        help="The environment of topics.yaml to apply, as `onceflow topics migrate --env` "
        "(default $ONCEFLOW_ENV, else none: "
        "replication factor 1); 'production' gives replication factor 3 and "
        "min.insync.replicas 2, for a cluster of 3 or more brokers.",
    )
    parser.add_argument(
        "--reset-topics",
        action="store_true",
        help=f"Delete and recreate the demo's topics ({INPUT}, {OUTPUT}, {MARKER_TOPIC}) "
        "first, with every record an earlier run left in them.",
    )
    parser.add_argument("--database-url", help="Default: sqlite:///.demo/onceflow.db")
    parser.add_argument("--master", default="local[2]", help="Spark master URL.")
    parser.add_argument("--state", type=Path, default=Path(".demo"))
    parser.add_argument("--orders", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=3_000, help="Orders per second.")
    parser.add_argument(
        "--kill-after-batch",
        type=int,
        default=2,
        help="SIGKILL the Spark job once this many revenue micro-batches have finished.",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="Orders per micro-batch at most (maxOffsetsPerTrigger; default: twice --rate, "
        f"and at most --orders / {BATCHES}).",
    )
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args(argv)
    args.state = args.state.resolve()
    if args.database_url is None:
        args.database_url = f"sqlite:///{args.state / 'onceflow.db'}"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
