"""``spark.python.daemon.module=onceflow.spark.daemon``: an executor's Python workers are
forked with onceflow's modules imported and out of the garbage collector's reach, as a
cluster runs them (no fork server: a session of its own, in a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark]

JOB = r"""
import json, sys
from onceflow.spark.session import local_session
config = {"spark.python.daemon.module": sys.argv[1]} if sys.argv[1] else {}
spark = local_session("daemon-module", fork_server=False, config=config)

def seen(_):
    import gc
    return (gc.get_freeze_count(), "onceflow.spark.kafka_source.tasks" in sys.modules)

print(json.dumps(spark.sparkContext.parallelize(range(4), 2).map(seen).collect()))
spark.stop()
"""


def workers(daemon_module: str) -> list[list]:
    result = subprocess.run(
        [sys.executable, "-c", JOB, daemon_module], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_workers_of_onceflows_daemon_start_with_its_modules_frozen() -> None:
    for frozen, loaded in workers("onceflow.spark.daemon"):
        assert frozen > 20_000 and loaded
    for frozen, loaded in workers(""):  # PySpark's own daemon: nothing frozen or preloaded
        assert frozen == 0 and not loaded
