"""The orders demo's Spark job as a process it can SIGKILL mid-batch, and when things
happened during a run."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


BATCHES = 5  # micro-batches a run takes at least, so the planned kill lands mid-run


def batch_size(orders: int, rate: float) -> int:
    """maxOffsetsPerTrigger: at least BATCHES batches, and room to catch up at twice ``rate``.

    Spark runs a micro-batch only when new orders arrived, so with one big batch a small
    run (``--orders 3000``) was over before batch ``--kill-after-batch`` and nothing was
    killed. With at least BATCHES batches the kill after batch 2 always lands mid-run.
    Not more: a micro-batch of the two queries on local[2] costs 1.0-1.5 s whatever its
    size (planning, offset and commit logs, Python workers, the sinks' transactions), so
    10 batches of 3,000 orders ran at ~2,200 orders/s, behind the 3,000/s generator;
    batches of 6,000 run at 3,400-4,100/s.
    """
    return max(1, min(int(2 * rate), orders // BATCHES))


def restart_batch_size(orders: int, rate: float) -> int:
    """maxOffsetsPerTrigger once the job is restarted: no kill is planned in that run, and
    the backlog the kill left (the orders of the seconds the job was down) is taken in a
    batch or two instead of one per ``2 * rate`` orders: a micro-batch costs 1.0-1.5 s
    whatever its size, so with the first run's cap a restarted job read about as fast as
    the orders came and caught up only when they stopped. Steady-state batches are far
    below either cap."""
    return max(batch_size(orders, rate), int(10 * rate))


class Pipeline:
    """The Spark job as a process group, so SIGKILL takes the JVM down with the driver."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, log_path: Path) -> None:
        self.command = [
            sys.executable,
            str(HERE / "pipeline.py"),
            "--bootstrap",
            bootstrap,
            "--database-url",
            args.database_url,
            "--checkpoint-dir",
            str(args.state / "checkpoints"),
            "--master",
            args.master,
        ]
        self.batch_sizes = (  # the first run's, then the restarted job's
            args.batch_size or batch_size(args.orders, args.rate),
            args.batch_size or restart_batch_size(args.orders, args.rate),
        )
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self.run = 0  # 1 for the first start, 2 after the restart
        self.batches: list[dict] = []  # every micro-batch's summary, in arrival order
        self.started = threading.Event()  # the queries are running
        self.failure: str | None = None  # the one-line reason a query failed

    def start(self) -> None:
        self.run += 1
        self.started.clear()
        log = open(self.log_path, "a")  # noqa: SIM115  (owned by the child process)
        cap = self.batch_sizes[min(self.run, 2) - 1]
        self.process = subprocess.Popen(
            [*self.command, "--max-offsets-per-trigger", str(cap)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        threading.Thread(target=self._watch, args=(self.process, self.run), daemon=True).start()

    def _watch(self, process: subprocess.Popen[str], run: int) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "progress":
                self.batches.append({**json.loads(rest), "run": run})
            elif line.startswith("pipeline started"):
                self.started.set()
            elif kind == "failed":
                self.failure = rest

    def done_batches(self, query: str) -> int:
        return sum(1 for b in self.batches if b["query"] == query and b["run"] == self.run)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM to the driver alone: it stops its queries, then the session. (Sent to the
        whole group, it also ended the data source's Python planner under a running query,
        whose JVM side then logged the query as terminated with an EOFException.)"""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # whatever of the job is left
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    @property
    def failed(self) -> bool:
        return self.process is not None and self.process.poll() not in (None, 0, -15)


def unfinished_batch(checkpoint: Path) -> int | None:
    """The micro-batch Spark planned but never committed (what a mid-batch kill leaves)."""

    def numbers(folder: str) -> set[int]:
        path = checkpoint / folder
        return {int(f.name) for f in path.iterdir() if f.name.isdigit()} if path.exists() else set()

    planned = numbers("offsets")
    committed = numbers("commits")
    pending = planned - committed
    return max(pending) if pending else None


class Timeline:
    """When things happened during a run (a plain class: tests import this file by path)."""

    def __init__(self) -> None:
        self.generator_started = 0.0
        self.generator_finished = 0.0
        self.killed_at: float | None = None  # time.time() of the SIGKILL
        self.unfinished_batch: int | None = None  # the revenue batch the kill interrupted
        self.caught_up_after_kill: float | None = None  # seconds from the kill to no backlog


def kill_mid_batch(pipeline: Pipeline, args: argparse.Namespace, timeline: Timeline) -> None:
    """SIGKILL the job as soon as the revenue query has planned a micro-batch (written its
    offsets to the checkpoint) and not committed it yet: in the middle of that batch."""
    checkpoint = args.state / "checkpoints" / "revenue"
    deadline = time.monotonic() + 60
    while unfinished_batch(checkpoint) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    pipeline.kill()
    timeline.killed_at = time.time()
    timeline.unfinished_batch = unfinished_batch(checkpoint)


def backlog_rate(pipeline: Pipeline, query: str) -> str:
    """Orders/s of the query's micro-batches that started with more orders waiting."""
    busy = [b for b in pipeline.batches if b["query"] == query and b["behind"] > 0]
    milliseconds = sum(b["ms"] for b in busy)
    if not busy or milliseconds == 0:
        return "never behind"
    return f"{sum(b['rows'] for b in busy) * 1000 / milliseconds:,.0f}"
