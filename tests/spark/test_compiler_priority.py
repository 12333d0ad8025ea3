"""A local session's driver JVM runs its C2 compiler threads at a lower CPU priority than
its other threads (``onceflow.spark.compiler_priority``). The suite's own session runs C1
only (``tests.kit.jvm``), so this is a driver JVM of its own with the JVM's defaults,
started as ``local_session`` starts it, without a SparkContext."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from onceflow.spark.compiler_priority import DEFAULT_NICE, NICE_VARIABLE

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread priorities"),
]

JVM = r"""
import json
from pathlib import Path
from pyspark.java_gateway import launch_gateway
from onceflow.proc_stat import NICE, stat_fields
from onceflow.spark.compiler_priority import C2_THREAD_PREFIX, CompilerPriority
watcher = CompilerPriority.start()  # as local_session does: then the driver JVM starts
gateway = launch_gateway()
found_first = watcher.jvm  # the watcher's own find, before it is told
watcher.session_started(gateway.proc.pid)
nice = {"C2": [], "other": [], "found": found_first == gateway.proc.pid}
for task in Path(f"/proc/{gateway.proc.pid}/task").iterdir():
    kind = "C2" if (task / "comm").read_text().startswith(C2_THREAD_PREFIX) else "other"
    nice[kind].append(int(stat_fields(int(task.name))[NICE]))
print(json.dumps(nice))
gateway.shutdown()
"""


def test_the_driver_jvms_c2_threads_run_at_a_lower_priority() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", NICE_VARIABLE)}
    result = subprocess.run(
        [sys.executable, "-c", JVM], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    nice = json.loads(result.stdout.strip().splitlines()[-1])
    assert nice["C2"] and set(nice["C2"]) == {DEFAULT_NICE}
    assert set(nice["other"]) == {0}  # the JVM's own, Spark's and C1's threads
    assert nice["found"]  # by the watcher, while the JVM started
