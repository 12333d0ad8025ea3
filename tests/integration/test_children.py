"""onceflow.children: a child dies with its parent, even a SIGKILLed one, and starting
one runs no Python in the forked child (which would cut PySpark's connection to the JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PARENT = """
import sys, time
from onceflow import children
child = children.popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat  # a zombie is dead


def test_a_child_dies_with_its_sigkilled_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), Path(f"/proc/{child}/stat").read_text()


def test_the_child_runs_the_command_itself() -> None:
    from onceflow import children

    child = children.popen([sys.executable, "-c", "import os; print(os.getpid())"],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    out, _ = child.communicate(timeout=30)
    assert int(out) == child.pid  # exec'd in place: signals reach the command
