"""onceflow.spark.register gives each data source a thread-safe environment map.

Spark shares one environment map between every query on a registered Python data source,
and each streaming query's PythonStreamingSourceRunner writes into it without a lock; see
onceflow.spark.registration and test_multi_query_restart.py for what a plain HashMap does.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from onceflow.spark.registration import environment_map
from onceflow.spark.workers import worker_problem

pytestmark = [pytest.mark.spark]


@pytest.mark.parametrize("name", ["onceflow", "onceflow-database", "onceflow-kafka"])
def test_registered_sources_have_a_concurrent_environment_map(spark, name):
    env = environment_map(spark, name)
    assert env.getClass().getName() == "java.util.concurrent.ConcurrentHashMap"
    assert env.get("PYTHONHASHSEED") == spark.sparkContext.environment["PYTHONHASHSEED"]


def test_source_works_after_its_runner_wrote_into_the_shared_map(spark, kafka_broker, topic):
    from tests.spark.sink_helpers import make_orders

    make_orders(kafka_broker.bootstrap, topic, 10)
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName(f"registration_{topic.replace('-', '_')}")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.sql(f"SELECT * FROM registration_{topic.replace('-', '_')}").count()
    assert rows == 10
    # PythonStreamingSourceRunner.init() put its settings into the registered map itself
    assert environment_map(spark, "onceflow").containsKey("SPARK_LOCAL_DIRS")


def test_a_write_starts_on_a_thread_that_activated_the_session(spark, tmp_path):
    """Spark finds Python data sources through the calling thread's active session; a
    new thread has none until ``activate``."""
    from onceflow.spark import activate

    outcome: list[object] = []

    def start_query() -> None:
        try:
            activate(spark)
            writer = (
                spark.range(5)
                .write.mode("append")
                .format("onceflow-database")
                .option("url", f"sqlite:///{tmp_path / 'out.db'}")
                .option("table", "numbers")
                .option("mode", "append")
                .option("sinkId", "from-a-thread")
            )
            writer.save()
            outcome.append("saved")
        except Exception as error:  # reported by the assertion below
            outcome.append(f"{type(error).__name__}: {error}")

    worker = threading.Thread(target=start_query)
    worker.start()
    worker.join(120)
    assert outcome == ["saved"]
    with sqlite3.connect(tmp_path / "out.db") as db:
        assert db.execute("SELECT count(*) FROM numbers").fetchone() == (5,)


def test_workers_with_this_interpreter_are_fine():
    assert worker_problem(sys.executable, "local[2]") is None
    assert worker_problem("/usr/bin/python3-without-onceflow", "spark://host:7077") is None


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs a system python3")
def test_register_warns_at_once_when_workers_lack_onceflow(tmp_path):
    """A new user's first run: no PYSPARK_PYTHON, so workers run a python3 without onceflow."""
    script = tmp_path / "job.py"
    script.write_text(
        "import warnings, sys\n"
        "from pyspark.sql import SparkSession\n"
        "import onceflow.spark\n"
        "spark = SparkSession.builder.master('local[1]')"
        ".config('spark.ui.enabled', 'false').getOrCreate()\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    onceflow.spark.register(spark)\n"
        "print('WARNINGS', [str(w.message) for w in caught], flush=True)\n"
        "spark.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON",)}
    env["PYSPARK_PYTHON"] = "/usr/bin/python3"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=180
    )
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("WARNINGS"))
    assert "Spark's Python workers run '/usr/bin/python3'" in line
    assert f"Set PYSPARK_PYTHON={sys.executable}" in line
    assert time.monotonic() - started < 120
