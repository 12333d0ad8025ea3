"""One process of a pipeline under test, in its own process group, its output in a log.

Killed whole (``killpg``): a Spark driver dies with its JVM and Python workers, a shell
script with its children. It never outlives the process that started it
(``onceflow.children``). Its log is appended to across restarts, so ``log_since`` reads
what one life wrote.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from onceflow import children

CRASH_LINE = re.compile(r"onceflow crash point: SIGKILL at (\w+) #(\d+)")
PAUSE_LINE = re.compile(r"onceflow pause point: paused at (\w+) #(\d+)")


class StartError(RuntimeError):
    """The command could not be started at all (not found, not executable)."""


INTERRUPT_GRACE_S = 3.0  # a stopped life's time to exit on Ctrl-C


class ProcessGroup:
    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.log_offset = 0  # where this life's output starts in the log

    def start(self) -> ProcessGroup:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 (inherited by the child)
        try:
            self.process = children.popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        except OSError as error:
            raise StartError(f"cannot start {self.argv[0]!r}: {error.strerror}") from None
        finally:
            log.close()
        self.started = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def poll(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        assert self.process is not None, "not started"
        code = self.process.wait(timeout)
        children.forget(self.process)
        return code

    def signal_group(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the whole group (whatever of it is left)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> int | None:
        """SIGKILL the whole group (whatever of it is left); the leader's exit code."""
        if self.process is None:
            return None
        self.signal_group(signal.SIGKILL)
        return self.wait()

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Ctrl-C to the leader (a Python consumer then exits through its interpreter's
        shutdown, and librdkafka leaves the group: the next trial on a shared cluster
        need not wait out a dead member), SIGTERM after a few seconds (a Spark driver stops
        its queries before its JVM goes), then SIGKILL to the group after ``grace_s`` or
        once the leader is gone."""
        if self.process is None:
            return None
        code: int | None = None
        for sig, wait_s in ((signal.SIGINT, INTERRUPT_GRACE_S), (signal.SIGTERM, grace_s)):
            try:
                self.process.send_signal(sig)
                code = self.process.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.kill()
        return code if code is not None else self.process.returncode

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def log_since_start(self) -> str:
        """What this life wrote to the log."""
        try:
            with open(self.log_path, "rb") as file:
                file.seek(self.log_offset)
                return file.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def crashed_at_crash_point(self) -> bool:
        """Did this life SIGKILL itself at a crash point (its line is in the log)?"""
        return (
            self.poll() == -signal.SIGKILL and CRASH_LINE.search(self.log_since_start()) is not None
        )

    def last_error_line(self) -> str:
        lines = [line.strip() for line in self.log_since_start().splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line]
        return (errors or lines or ["no output"])[-1]
