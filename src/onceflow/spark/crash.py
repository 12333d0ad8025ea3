"""Crash points for the sinks' chaos tests: SIGKILL at a chosen step of a chosen batch.

Armed only through the environment, so it reaches executor and driver Python workers::

    ONCEFLOW_SPARK_CRASH_AT="database.after_commit@2"      # when batch 2 reaches the step
    ONCEFLOW_SPARK_CRASH_AT="kafka.after_task_commit@1/0"  # batch 1, task partition 0
    ONCEFLOW_SPARK_CRASH_PGID=12345                        # kill this process group

``ONCEFLOW_SPARK_CRASH_FILE`` names a file that gets one line per crash (worker stderr is
lost with the JVM). Without ``ONCEFLOW_SPARK_CRASH_PGID`` the reaching process kills
itself. A test runs the query in a subprocess started in its own session and sets the
group id to that session, so the crash takes down the whole driver (Python driver, JVM)
like a machine failure.
Steps: ``database.after_stage``, ``database.before_commit``, ``database.after_commit``,
``kafka.after_task_commit``, ``kafka.before_commit``.
"""

from __future__ import annotations

import os
import signal
import sys

ENV_VAR = "ONCEFLOW_SPARK_CRASH_AT"
PGID_VAR = "ONCEFLOW_SPARK_CRASH_PGID"
FILE_VAR = "ONCEFLOW_SPARK_CRASH_FILE"  # optional: append a line here before the kill


def _armed(spec: str, step: str, batch_id: int | None, partition: int | None) -> bool:
    for item in spec.split(","):
        name, _, where = item.strip().partition("@")
        if name != step:
            continue
        if not where:
            return True
        batch, _, part = where.partition("/")
        if batch and (batch_id is None or int(batch) != batch_id):
            continue
        if part and (partition is None or int(part) != partition):
            continue
        return True
    return False


def reached(step: str, batch_id: int | None = None, partition: int | None = None) -> None:
    spec = os.environ.get(ENV_VAR)
    if not spec or not _armed(spec, step, batch_id, partition):
        return
    line = f"onceflow spark crash point: SIGKILL at {step} batch={batch_id} partition={partition}"
    print(line, file=sys.stderr, flush=True)
    if os.environ.get(FILE_VAR):
        with open(os.environ[FILE_VAR], "a", encoding="utf-8") as file:
            file.write(line + "\n")
            file.flush()
            os.fsync(file.fileno())
    group = os.environ.get(PGID_VAR)
    if group:
        os.killpg(int(group), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
