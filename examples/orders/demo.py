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
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from demo_audit import Confirmations, audit, revenue_totals  # noqa: E402
from demo_job import BATCHES, Pipeline, Timeline, kill_mid_batch  # noqa: E402
from generator import generate  # noqa: E402

from onceflow.broker.process import BrokerProcess  # noqa: E402

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
        f"and at most --orders / {BATCHES}, then ten times --rate once the job is restarted).",
    )
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args(argv)
    args.state = args.state.resolve()
    if args.database_url is None:
        args.database_url = f"sqlite:///{args.state / 'onceflow.db'}"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
