"""One life of the pipeline: start it in its own process group, end it the planned way.

A life ends in one of four ways: the process dies at its armed crash point (Runner mode),
the supervisor SIGKILLs its whole process group once the outputs grew by the planned
number of records (command mode), it drains its input and exits or goes quiet (the last
life), or it misbehaves (exits at once, stalls), which is a ``ProveError``. Whatever the
ending, nothing of the group is left running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onceflow.prove.errors import ProveError
from onceflow.prove.probe import OutputProbe
from onceflow.prove.schedule import PROGRESS, Kill

POLL_S = 0.001
CRASH_LINE = re.compile(r"onceflow crash point: SIGKILL at (\w+) #(\d+)")


@dataclass(frozen=True, slots=True)
class LifeResult:
    kill: Kill | None
    landed: bool  # the planned kill happened (False: the input drained first)
    exit_code: int | None
    seconds: float
    outputs_before: int
    outputs_after: int


@dataclass(slots=True)
class Limits:
    stall_s: float = 60.0  # no output growth for this long while not drained: an error
    settle_s: float = 2.0  # outputs unchanged this long (and drained): the last life ends
    start_s: float = 60.0  # a first life with no output at all after this long: an error


class Life:
    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        probe: OutputProbe,
        drained: Callable[[], bool],
        limits: Limits,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self.probe = probe
        self.drained = drained
        self.limits = limits

    def run(self, kill: Kill | None) -> LifeResult:
        started = time.monotonic()
        before = self.probe.count()
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        process = self._start()
        try:
            landed, code, stopped = self._watch(process, kill, before)
        finally:
            kill_group(process)
        # Once prove stopped it (drained), any exit is the pipeline's way of stopping.
        if not stopped and code not in (0, -signal.SIGKILL, -signal.SIGTERM) and not landed:
            raise ProveError(self._exit_message(code, offset, before))
        if code == -signal.SIGKILL and kill is not None and kill.step != PROGRESS:
            landed = self._crash_line(offset) is not None
            if not landed:
                raise ProveError(f"the pipeline was killed by someone else (SIGKILL); "
                                 f"see {self.log_path}")  # fmt: skip
        return LifeResult(kill, landed, code, time.monotonic() - started, before,
                          self.probe.count())  # fmt: skip

    def _start(self) -> subprocess.Popen[bytes]:
        log = open(self.log_path, "ab")  # noqa: SIM115 (inherited by the child)
        try:
            return subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killed whole
            )
        except OSError as error:
            raise ProveError(f"cannot start {self.argv[0]!r}: {error.strerror}") from None
        finally:
            log.close()

    def _watch(
        self, process: subprocess.Popen[bytes], kill: Kill | None, before: int
    ) -> tuple[bool, int | None, bool]:
        """(kill landed, exit code, stopped by prove once drained)."""
        last_count, last_change = before, time.monotonic()
        started = last_change
        armed = False  # the outputs grew enough: kill on the next write
        while True:
            code = process.poll()
            if code is not None:
                return False, code, False
            time.sleep(POLL_S)
            if armed:
                if self.probe.written():
                    return True, self._kill(process), False
                if time.monotonic() - last_change < self.limits.settle_s:
                    continue  # watch for the next commit only, as often as possible
            count = self.probe.count()
            now = time.monotonic()
            if count != last_count:
                last_count, last_change = count, now
            if kill is not None and kill.step == PROGRESS and count - before >= kill.occurrence:
                if not self.probe.sees_writes:
                    return True, self._kill(process), False
                armed = True
                self.probe.written()  # commits from here on
            quiet = now - last_change
            settled = quiet >= self.limits.settle_s and (kill is None or kill.step == PROGRESS)
            if settled and self.drained():
                return False, self._stop(process), True
            if count == before and now - started > self.limits.start_s:
                raise ProveError(
                    f"the pipeline wrote no output in {self.limits.start_s:.0f} s after "
                    f"starting (see {self.log_path})"
                )
            if quiet > self.limits.stall_s:
                raise ProveError(
                    f"the pipeline never drained its input: no output for "
                    f"{self.limits.stall_s:.0f} s with input left (see {self.log_path})"
                )

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> int:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait()

    @staticmethod
    def _stop(process: subprocess.Popen[bytes]) -> int | None:
        """Drained: SIGTERM to the pipeline's own process (a graceful end: a Spark driver
        stops its queries before its JVM and Python workers go), then SIGKILL to the whole
        group if it lingers."""
        try:
            os.kill(process.pid, signal.SIGTERM)
            return process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait()
        except ProcessLookupError:
            return process.wait()

    def _crash_line(self, offset: int) -> re.Match[str] | None:
        return CRASH_LINE.search(self._log_since(offset))

    def _log_since(self, offset: int) -> str:
        with open(self.log_path, "rb") as file:
            file.seek(offset)
            return file.read().decode("utf-8", errors="replace")

    def _exit_message(self, code: int | None, offset: int, before: int) -> str:
        lines = [line.strip() for line in self._log_since(offset).splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line]
        last = (errors or lines or ["no output"])[-1]
        when = "at once" if self.probe.count() == before else "after processing some input"
        return f"the pipeline exited {when} with code {code}: {last}"


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of the process group (children the pipeline started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        process.wait()
