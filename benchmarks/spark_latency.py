"""The orders pipeline at a steady input rate, and its restart, on onceflow and on Spark's
own JVM Kafka connector doing the same work, in one run.

    .venv-spark-connector/bin/python benchmarks/spark_latency.py [--rate 3000]
        [--seconds 45] [--warmup 15] [--after-kill 5] [--connectors onceflow,jvm]

Per connector, from a clean state: an embedded broker with the demo's topics
(examples/orders/topics.yaml), the job (examples/orders/pipeline.py: onceflow's source,
``onceflow-database`` and ``onceflow-kafka``; or benchmarks/spark_jvm_orders.py: Spark's
Kafka source, a ``foreachBatch`` into SQLite and Spark's Kafka sink, at least once), both
with the demo's options (a trigger every second, ``maxOffsetsPerTrigger`` twice the rate,
ten times the rate once restarted),
and the demo's generator writing ``--rate`` orders/s for ``--seconds`` + ``--after-kill``
seconds. Printed per connector and query:

* **first micro-batch**: the job's first batch (``triggerExecution``) at its start, and
  after its restart;
* **steady-state latency** p50 / p99 of the orders created after ``--warmup`` s and done
  before the kill: for the confirmations, from the order's creation to its confirmation
  read by a read_committed consumer; for the revenue, from its creation to the first
  database read (every 20 ms) whose order count covers it, orders counted in order of
  creation (a micro-batch reads every partition up to the offsets it planned, so the count
  covers the oldest orders first);
* **restart**: at ``--seconds`` the job is SIGKILLed in the middle of a revenue batch (as
  ``make demo`` does) and started again on its checkpoints, while the input goes on for
  ``--after-kill`` seconds (default 5, as in ``make demo``, whose 30,000 orders end 3-6 s
  after its kill). *Kill to caught up* runs until both outputs hold every order: the JVM
  and session start, the checkpoints' recovery, the replayed batch and the backlog of the
  seconds the job was down. With input that goes on longer than the restart takes (say
  ``--after-kill 25``), that is the end of the input, not the restart. *Kill to back in
  step* runs until the last order done later than its query's steady-state p99 was done:
  from then on the restarted job keeps the pace it kept before the kill (with a short
  input after the kill, about the same as caught up).

The load average at the start and the end is printed too.
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "orders"))

from demo import apply_topics  # noqa: E402
from demo_audit import Confirmations, percentile, revenue_totals  # noqa: E402
from demo_job import Pipeline, Timeline, kill_mid_batch  # noqa: E402
from generator import generate  # noqa: E402

from onceflow.broker.process import BrokerProcess  # noqa: E402

JOBS = {"onceflow": ROOT / "examples" / "orders" / "pipeline.py",
        "jvm": ROOT / "benchmarks" / "spark_jvm_orders.py"}  # fmt: skip
QUERIES = ("store_revenue", "order_confirmations")
SAMPLE_S = 0.02


@dataclass
class Run:
    """What one connector's run measured."""

    first_batch_ms: dict[tuple[int, str], int] = field(default_factory=dict)  # (run, query)
    latency_ms: dict[str, list[int]] = field(default_factory=dict)
    caught_up_s: float | None = None
    in_step_s: dict[str, float] = field(default_factory=dict)  # per query


class Created:
    """When the generator created each order: (number, time) every 500 orders."""

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.times: list[float] = []
        self.count = 0

    def progress(self, number: int) -> None:
        self.numbers.append(number)
        self.times.append(time.time())
        self.count = number

    def at(self, number: int) -> float:
        index = min(bisect.bisect_right(self.numbers, number), len(self.numbers) - 1)
        if index == 0:
            return self.times[0]
        n0, n1 = self.numbers[index - 1], self.numbers[index]
        t0, t1 = self.times[index - 1], self.times[index]
        return t0 if n1 == n0 else t0 + (t1 - t0) * (number - n0) / (n1 - n0)


def run_connector(connector: str, args: argparse.Namespace, work: Path) -> Run:
    state = work / connector
    state.mkdir()
    total = int(args.rate * (args.seconds + args.after_kill))
    job_args = argparse.Namespace(
        database_url=f"sqlite:///{state / 'onceflow.db'}", state=state, master="local[2]",
        batch_size=None, orders=total, rate=args.rate,
    )  # fmt: skip
    broker = BrokerProcess(state / "broker", log_path=state / "broker.log").start()
    pipeline = Pipeline(job_args, broker.bootstrap, state / "pipeline.log")
    pipeline.command[1] = str(JOBS[connector])
    result = Run()
    try:
        apply_topics(broker.bootstrap)
        pipeline.start()
        if not pipeline.started.wait(300):
            sys.exit(f"{connector}: the job did not start (its log: {pipeline.log_path})")
        created = Created()
        counts: list[tuple[float, int]] = []  # (time, orders counted in the revenue)
        confirmations = Confirmations(broker.bootstrap)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                counted = sum(o for _, o in revenue_totals(job_args.database_url).values())
                counts.append((time.time(), counted))
                confirmations.poll(SAMPLE_S)
                stop.wait(SAMPLE_S)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.time()
        generator = threading.Thread(
            target=generate,
            args=(broker.bootstrap, "orders", total, args.rate),
            kwargs={"progress": created.progress},
            daemon=True,
        )
        generator.start()
        timeline = Timeline()
        while time.time() < started + args.seconds:
            check_job(pipeline, connector)
            time.sleep(0.1)
        kill_mid_batch(pipeline, job_args, timeline)
        pipeline.start()
        assert timeline.killed_at is not None
        deadline = time.monotonic() + args.after_kill + 300
        while time.monotonic() < deadline:
            check_job(pipeline, connector)
            counted = counts[-1][1] if counts else 0
            if result.caught_up_s is None and min(counted, confirmations.count) >= created.count:
                result.caught_up_s = time.time() - timeline.killed_at
            if not generator.is_alive() and min(counted, confirmations.count) >= total:
                break
            time.sleep(0.05)
        stop.set()
        sampler.join()
        confirmations.close()
        # Orders created after the warm-up and done before the kill: the kill's own delay
        # is the restart's figure, not the steady state's.
        window = (started + args.warmup, timeline.killed_at)
        done = {
            "order_confirmations": [
                (created_ms / 1000, (created_ms + latency) / 1000)
                for created_ms, latency in confirmations.latencies
            ],
            "store_revenue": revenue_done(created, counts),
        }
        for query, orders in done.items():
            result.latency_ms[query] = [
                int((end - born) * 1000) for born, end in orders
                if window[0] <= born and end < window[1]
            ]  # fmt: skip
            if result.latency_ms[query]:
                result.in_step_s[query] = back_in_step(
                    orders, percentile(result.latency_ms[query], 0.99) / 1000, timeline.killed_at
                )
        for batch in pipeline.batches:
            result.first_batch_ms.setdefault((batch["run"], batch["query"]), batch["ms"])
    finally:
        pipeline.stop()
        broker.stop()
    return result


def check_job(pipeline: Pipeline, connector: str) -> None:
    if pipeline.failed:
        sys.exit(f"{connector}: the job failed: {pipeline.failure} (its log: {pipeline.log_path})")


def revenue_done(created: Created, counts: list[tuple[float, int]]) -> list[tuple[float, float]]:
    """(created, done) per order the revenue counted: done is the first database read whose
    order count covered it."""
    done = []
    reads = iter(counts)
    seen_at, counted = next(reads, (0.0, 0))
    for number in range(created.count):
        while counted <= number:
            seen_at, counted = next(reads, (None, None))
            if seen_at is None:
                return done
        done.append((created.at(number), seen_at))
    return done


def back_in_step(orders: list[tuple[float, float]], p99_s: float, killed_at: float) -> float:
    """Seconds from the kill until the last order done after it, later than ``p99_s``
    after its creation, was done: 0 if none was late."""
    late = [end for born, end in orders if end > killed_at and end - born > p99_s]
    return max(late) - killed_at if late else 0.0


def report(runs: dict[str, Run], args: argparse.Namespace, loads: tuple[float, float]) -> None:
    print(
        f"orders pipeline at {args.rate:,.0f} orders/s; steady state: orders created after "
        f"{args.warmup:.0f} s, done before the kill at {args.seconds:.0f} s; load "
        f"{loads[0]:.1f} -> {loads[1]:.1f}"
    )
    print(f"  {'':44}" + "".join(f"{name:>14}" for name in runs) + "   onceflow / jvm")

    def row(label: str, values: dict[str, float | None], unit: str) -> None:
        cells = "".join(f"{'-' if v is None else f'{v:,.2f} {unit}':>14}" for v in values.values())
        mine, theirs = values.get("onceflow"), values.get("jvm")
        ratio = f"   {mine / theirs:.2f}" if mine is not None and theirs else ""
        print(f"  {label:44}{cells}{ratio}")

    for query in QUERIES:
        for run_number, when in ((1, "start"), (2, "restart")):
            row(
                f"{query} first batch ({when})",
                {n: _seconds(r.first_batch_ms.get((run_number, query))) for n, r in runs.items()},
                "s",
            )
        for fraction, name in ((0.5, "p50"), (0.99, "p99")):
            row(
                f"{query} latency {name}",
                {
                    n: percentile(r.latency_ms[query], fraction) / 1000
                    if r.latency_ms.get(query)
                    else None
                    for n, r in runs.items()
                },
                "s",
            )
    row("kill to caught up", {n: r.caught_up_s for n, r in runs.items()}, "s")
    row(
        "kill to back in step (both queries)",
        {n: max(r.in_step_s.values()) if r.in_step_s else None for n, r in runs.items()},
        "s",
    )
    counts = {n: statistics.mean(len(v) for v in r.latency_ms.values()) for n, r in runs.items()}
    print("  orders timed per query: " + ", ".join(f"{n} {c:,.0f}" for n, c in counts.items()))


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--seconds", type=float, default=45, help="steady run before the kill")
    parser.add_argument("--warmup", type=float, default=15, help="not timed: the first batches")
    parser.add_argument(
        "--after-kill", type=float, default=5, help="seconds of input after the kill"
    )
    parser.add_argument("--connectors", default="onceflow,jvm")
    args = parser.parse_args()
    connectors = [c for c in args.connectors.split(",") if c]
    if unknown := set(connectors) - set(JOBS):
        sys.exit(f"unknown connectors {sorted(unknown)}: choose from {', '.join(JOBS)}")
    if "jvm" in connectors and not any((Path(sys.prefix) / "connector-jars").glob("*.jar")):
        sys.exit("Spark's connector jars are not in this virtualenv: run it with "
                 ".venv-spark-connector/bin/python (make bench makes it)")  # fmt: skip
    loads = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="onceflow-latency-"))
    try:
        runs = {connector: run_connector(connector, args, work) for connector in connectors}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(runs, args, (loads, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
