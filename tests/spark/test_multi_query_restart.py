"""Several queries on the ``onceflow`` source in one SparkSession survive repeated SIGKILLs.

examples/orders/pipeline.py runs two such queries; after the demo SIGKILLed it, about one
restart in three failed both queries' first micro-batch with
``java.io.OptionalDataException`` at ``HashMap.readObject``: on a restart the queries'
threads create their streams in lockstep (released together from the class initialisation
of Spark's ArrowUtils), and their PythonStreamingSourceRunner.init() calls race on the
data source's shared environment map (docs/spark.md, "Several queries on one source").
The job (multi_query_job.py, three queries on one DataFrame, started at once) is killed
mid-run and restarted RESTARTS times; every run must get every query through a
micro-batch. A last run drains the topic, and each query's totals must be exact.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.spark.sink_helpers import expected_totals, make_orders

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).with_name("multi_query_job.py")
ROOT = JOB.parents[2]
QUERIES = 3
# At the old failure rate (about 1 in 3 restarts with two queries) 3 restarts catch it with
# p > 0.7 in every CI run (a regression shows within a few runs); `make stress` runs 20
# (p > 0.9997).
RESTARTS = int(os.environ.get("ONCEFLOW_SPARK_RESTARTS", "3"))
ORDERS = 3000  # far more than the killed runs read at maxOffsetsPerTrigger=20


class Job:
    """multi_query_job.py in its own process group, its stdout watched for batch lines."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
        env["PYTHONUNBUFFERED"] = "1"
        self.log_path = tmp_path / "job.log"
        with self.log_path.open("a") as log:
            log.write(f"--- {' '.join(args)}\n")
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, str(JOB), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,  # SIGKILL takes the JVM down with the driver
            )

    def wait_for_batches(self, timeout: float) -> set[str]:
        """Read stdout until every query finished a micro-batch with rows in this run."""
        assert self.process.stdout is not None
        done: set[str] = set()
        deadline = time.monotonic() + timeout
        os.set_blocking(self.process.stdout.fileno(), False)
        while len(done) < QUERIES and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
                continue
            parts = line.split()
            if len(parts) == 4 and parts[0] == "batch" and int(parts[3]) > 0:
                done.add(parts[1])
        return done

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def error(self) -> str:
        lines = self.log_path.read_text().splitlines()
        failures = [line for line in lines if "failed:" in line or "Exception" in line]
        return "\n".join((failures or lines)[-5:])[-2000:]


def totals(path: Path) -> dict[str, tuple[int, int]]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT store, revenue, orders FROM store_revenue").fetchall()
    return {store: (int(revenue), int(orders)) for store, revenue, orders in rows}


def test_queries_on_one_source_survive_repeated_driver_kills(kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    orders = make_orders(bootstrap, topic, ORDERS)
    args = ["--bootstrap", bootstrap, "--topic", topic, "--state", str(tmp_path)]
    args += ["--queries", str(QUERIES)]
    failures: list[str] = []
    for restart in range(RESTARTS):
        job = Job(tmp_path, *args)
        done = job.wait_for_batches(timeout=240)  # generous: CI machines can be very busy
        time.sleep(0.3 * (restart % 3))  # kill inside a later micro-batch, or right after
        exited = job.process.poll()
        job.kill()
        if len(done) < QUERIES:
            how = f"exit code {exited}" if exited is not None else "still running after 240 s"
            ran = sorted(done)
            failures.append(f"run {restart}: only {ran} ran a batch ({how})\n{job.error()}")

    final = Job(tmp_path, *args, "--available-now", "--max-offsets-per-trigger", "100000")
    try:
        assert final.process.wait(120) == 0, final.error()
    finally:
        final.kill()
    assert not failures, f"{len(failures)} of {RESTARTS} runs failed:\n" + "\n".join(failures)
    expected = expected_totals(orders)
    for i in range(QUERIES):
        assert totals(tmp_path / f"q{i}.db") == expected, f"query q{i}"
