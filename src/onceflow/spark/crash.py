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

Pause points stop a task at a step instead, so that a test can kill something else (an
executor JVM on a Spark cluster) while the task is in the middle of a batch::

    ONCEFLOW_SPARK_PAUSE_AT="database.after_stage@1,kafka.before_task_commit@1"
    ONCEFLOW_SPARK_PAUSE_DIR=/tmp/pauses     # <dir>/<step> gets "pid batch partition"
    ONCEFLOW_SPARK_PAUSE_SECONDS=120         # how long the task sleeps there

Only the first process to reach a step pauses (a retried task goes on).

Steps: ``database.after_stage`` (a staging task), ``database.before_task_commit`` (a
direct task, inside its open transaction), ``database.after_task_commit`` (a direct
task), ``database.before_commit`` and ``database.after_commit`` (the driver),
``kafka.before_task_commit`` (inside the task's open transaction),
``kafka.after_task_commit``, ``kafka.before_commit``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

ENV_VAR = "ONCEFLOW_SPARK_CRASH_AT"
PGID_VAR = "ONCEFLOW_SPARK_CRASH_PGID"
FILE_VAR = "ONCEFLOW_SPARK_CRASH_FILE"  # optional: append a line here before the kill
PAUSE_PREFIX = "ONCEFLOW_SPARK_PAUSE_"
PAUSE_VAR = "ONCEFLOW_SPARK_PAUSE_AT"
PAUSE_DIR_VAR = "ONCEFLOW_SPARK_PAUSE_DIR"
PAUSE_SECONDS_VAR = "ONCEFLOW_SPARK_PAUSE_SECONDS"


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


def _pause(step: str, batch_id: int | None, partition: int | None) -> None:
    spec = os.environ.get(PAUSE_VAR)
    directory = os.environ.get(PAUSE_DIR_VAR)
    if not spec or not directory or not _armed(spec, step, batch_id, partition):
        return
    try:  # the first process to reach the step claims it
        os.close(os.open(os.path.join(directory, f"{step}.claimed"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return
    line = f"{os.getpid()} {batch_id} {partition}\n"
    partial = os.path.join(directory, f".{step}.{os.getpid()}")
    with open(partial, "w", encoding="utf-8") as file:
        file.write(line)
    os.replace(partial, os.path.join(directory, step))  # appears whole to a watcher
    print(f"onceflow spark pause point: {step} {line.strip()}", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get(PAUSE_SECONDS_VAR, "60")))


def reached(step: str, batch_id: int | None = None, partition: int | None = None) -> None:
    _pause(step, batch_id, partition)
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
