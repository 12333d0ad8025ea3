"""The cluster lock of ``onceflow topics`` under concurrent runs (real processes): a
second migrate waits for the holder or gives up naming it, and two migrates started
together apply once."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from onceflow.topics.lock import LOCK_GROUP
from tests.integration.topics_helpers import (
    CLI_ENV,
    DEMO_TOPICS,
    cli_command,
    output,
    topics_process,
    write_spec,
)


def start_topics_cli(command: str, spec: Path, bootstrap: str, *options: str) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command(command, spec, bootstrap, *options),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )


class LineReader:
    """Lines of a child's pipe, read on a thread so a test can wait for one with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def wait_for(self, matches: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            self.seen.append(line)
            if matches(line):
                return line
        raise AssertionError(f"no matching line within {timeout}s; got {self.seen!r}")

    def rest(self) -> str:
        self._thread.join(30)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


# --------------------------------------------------------------------------- the lock

HOLDER_SCRIPT = """
import sys
from onceflow import topics
from onceflow.cli import main

def pause_inside_the_lock(plan):
    print("planned", len(plan.changes), flush=True)
    sys.stdin.readline()

plan = topics.run("migrate", sys.argv[1], sys.argv[2], on_plan=pause_inside_the_lock)
print("applied" if plan.applied else "not applied", flush=True)
"""


def test_a_concurrent_migrate_waits_for_the_holder_or_gives_up_naming_it(kafka_broker, cluster):
    bootstrap = kafka_broker.bootstrap
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, str(DEMO_TOPICS), bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )
    waiter = None
    try:
        assert holder.stdout is not None and holder.stdin is not None
        holder_out = LineReader(holder.stdout)
        holder_out.wait_for(lambda line: line == "planned 2\n")  # holds the lock, applied nothing
        named = f"pid {holder.pid} (onceflow topics migrate {DEMO_TOPICS})"

        impatient = topics_process("migrate", DEMO_TOPICS, bootstrap, "--lock-timeout", "1")
        assert impatient.returncode == 1, output(impatient)
        assert "error: the topics lock is held by " in impatient.stderr
        assert named in impatient.stderr
        assert "gave up after 1 s (--lock-timeout)" in impatient.stderr
        assert impatient.stdout == ""  # it planned nothing
        assert cluster.topics() == set()
        # and it left the lock group: a member left behind would stall every rebalance, so
        # the next runner would wait for its session to time out (10 s) before its turn
        cluster.wait_for_group_size(LOCK_GROUP, 1, timeout=5.0)

        waiter = start_topics_cli("migrate", DEMO_TOPICS, bootstrap, "--lock-timeout", "60")
        assert waiter.stderr is not None and waiter.stdout is not None
        waiter_err = LineReader(waiter.stderr)
        waiting = waiter_err.wait_for(lambda line: line.startswith("waiting up to 60 s"))
        assert named in waiting
        assert cluster.topics() == set()

        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(60) == 0, holder.stderr.read() if holder.stderr else ""
        assert holder_out.rest().endswith("applied\n")

        waiter_stdout = waiter.communicate(timeout=60)[0]
        assert waiter.returncode == 0, waiter_stdout + waiter_err.rest()
        # it planned only after the holder had applied: nothing was left to do
        assert waiter_stdout.splitlines()[-1] == "No changes: the cluster matches the spec."
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert cluster.partitions("orders") == 6
    assert cluster.override("orders", "retention.ms") == "604800000"


def test_two_migrates_started_together_apply_once(kafka_broker, cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """
        topics:
          a: {partitions: 3, config: {retention.ms: 1000}}
          b: {partitions: 2}
        """,
    )
    runs = [start_topics_cli("migrate", spec, kafka_broker.bootstrap) for _ in range(2)]
    results = [run.communicate(timeout=90) for run in runs]
    for run, (stdout, stderr) in zip(runs, results, strict=True):
        assert run.returncode == 0, stdout + stderr
    endings = sorted(stdout.splitlines()[-1] for stdout, _ in results)
    # one created both topics; the other planned after it and found nothing to do
    assert endings == ["Applied: 2 to create.", "No changes: the cluster matches the spec."]
    assert (cluster.partitions("a"), cluster.partitions("b")) == (3, 2)
    assert cluster.override("a", "retention.ms") == "1000"
