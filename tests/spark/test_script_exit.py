"""A Spark script that ends without ``spark.stop()`` ends quietly (issue 33, item 10).

``onceflow.spark.register`` installs a Python streaming query listener (the feedback-loop
warning). Without ``spark.stop()`` the JVM stops the session in its shutdown hook, after
the Python process has gone, and its listener bus used to call that listener then: the
job's rows were exact and its exit code 0, followed by ``ERROR StreamingQueryListenerBus:
Listener PythonStreamingQueryListenerWrapper threw an exception`` and about 60 lines of
py4j's Java traces. The listener is now removed when the interpreter exits.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.spark.sink_helpers import make_orders

pytestmark = [pytest.mark.spark]

SCRIPT = Path(__file__).with_name("script_without_stop.py")
ORDERS = 200


def test_script_without_spark_stop_ends_without_java_traces(kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    orders = make_orders(bootstrap, topic, ORDERS)
    database = tmp_path / "orders.db"
    # A user's environment: Spark's Python workers run the interpreter of the job's venv.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            bootstrap,
            topic,
            f"sqlite:///{database}",
            str(tmp_path / "cp"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]

    expected_revenue, expected_orders = Counter(), Counter()
    for order in orders:
        expected_revenue[order["store"]] += order["amount"]
        expected_orders[order["store"]] += 1
    with sqlite3.connect(database) as connection:
        rows = connection.execute("SELECT store, revenue, orders FROM store_revenue").fetchall()
    assert {store: (revenue, count) for store, revenue, count in rows} == {
        store: (expected_revenue[store], expected_orders[store]) for store in expected_orders
    }

    errors = [
        line
        for line in result.stderr.splitlines()
        if " ERROR " in line or "Exception" in line or "Traceback" in line
    ]
    assert errors == [], result.stderr[-3000:]
