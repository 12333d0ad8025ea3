"""``BrokerProcess`` leaves no broker behind when the process that started it dies (a
SIGKILLed or SIGTERMed pytest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

STARTER = """
import sys, time
from onceflow.testing import BrokerProcess
broker = BrokerProcess(sys.argv[1]).start()
print(broker.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl PR_SET_PDEATHSIG")
@pytest.mark.parametrize("signal_to_parent", [signal.SIGTERM, signal.SIGKILL])
def test_the_broker_dies_with_the_process_that_started_it(tmp_path, signal_to_parent):
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    broker_pid = int(starter.stdout.readline())
    try:
        assert alive(broker_pid)
        starter.send_signal(signal_to_parent)
        starter.wait(10)
        deadline = time.monotonic() + 10
        while alive(broker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(broker_pid), "the broker outlived the process that started it"
    finally:
        if alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
        starter.kill()
        starter.wait()
