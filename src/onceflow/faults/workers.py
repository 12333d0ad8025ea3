"""The pipeline's processes across their lives: started armed, ended, told apart.

A ``Worker`` is one of the pipeline's processes (``--workers N`` runs N copies of the
command). Each start is a *life*; a life is armed with at most one fault of its own: a
crash point where it SIGKILLs itself (``ONCEFLOW_CRASH_AT``, or ``ONCEFLOW_SPARK_CRASH_AT``
for a Spark sink step), a pause point where it waits for the run to do something else
(``ONCEFLOW_PAUSE_AT``), or a time into the life the run watches. When a life ends,
``ended()`` says how.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onceflow.crash_points import (
    ENV_VAR,
    PAUSE_DIR_VAR,
    PAUSE_VAR,
    PAUSED_FILE,
    RELEASE_FILE,
    SESSION_GROUP,
    SPARK_ENV_VAR,
    SPARK_FILE_VAR,
    SPARK_PGID_VAR,
)
from onceflow.faults.process import ProcessGroup
from onceflow.faults.schedule import TIME, Fault

# (worker index, life number, the life's extra environment) -> the process to start
ProcessFactory = Callable[[int, int, dict[str, str]], ProcessGroup]


class Ending(enum.StrEnum):
    CRASH_POINT = "SIGKILL at its crash point"
    KILLED = "SIGKILLed"
    EXITED = "exited"
    CRASHED = "crashed"
    STOPPED = "stopped"
    SIGKILL_UNEXPECTED = "SIGKILLed by someone else"


@dataclass(frozen=True, slots=True)
class Life:
    worker: int
    number: int
    fault: Fault | None  # the fault that ended it, or the in-process fault it was armed with
    landed: bool
    ending: Ending
    exit_code: int | None
    seconds: float
    outputs_before: int
    outputs_after: int


class Worker:
    def __init__(self, index: int, factory: ProcessFactory, work: Path) -> None:
        self.index = index
        self.factory = factory
        self.work = work
        self.lives = 0
        self.process: ProcessGroup | None = None
        self.last: ProcessGroup | None = None  # the current or last life's process
        self.armed: Fault | None = None
        self.outputs_at_start = 0
        self.killed = False  # the run SIGKILLed this life (a fault, or a stall)
        self.killed_by: Fault | None = None  # ... for this fault
        self.finished = False  # exited 0 with nothing left to do

    def start(self, armed: Fault | None, outputs: int) -> None:
        self.lives += 1
        self.armed = armed
        self.killed, self.killed_by = False, None
        self.outputs_at_start = outputs
        self.process = self.factory(self.index, self.lives, self._arming(armed)).start()
        self.last = self.process

    @property
    def log_path(self) -> Path | None:
        return None if self.last is None else self.last.log_path

    @property
    def last_error_line(self) -> str:
        return "no output" if self.last is None else self.last.last_error_line()

    def _arming(self, fault: Fault | None) -> dict[str, str]:
        if fault is None or fault.trigger == TIME:  # a time is watched by the run
            return {}
        point = f"{fault.trigger}:{fault.occurrence}"
        if fault.at_spark_step:
            self.spark_crash_file.unlink(missing_ok=True)
            # the whole job dies (driver, JVM, Python workers), as its machine would:
            # every life runs in a session of its own
            return {SPARK_ENV_VAR: f"{fault.trigger}@{fault.occurrence}",
                    SPARK_FILE_VAR: str(self.spark_crash_file),
                    SPARK_PGID_VAR: SESSION_GROUP}  # fmt: skip
        if fault.kills_worker:
            return {ENV_VAR: point}
        directory = self.pause_dir
        directory.mkdir(parents=True, exist_ok=True)
        for name in (PAUSED_FILE, RELEASE_FILE):
            (directory / name).unlink(missing_ok=True)
        return {PAUSE_VAR: point, PAUSE_DIR_VAR: str(directory)}

    @property
    def pause_dir(self) -> Path:
        return self.work / f"pause-{self.index}"

    @property
    def spark_crash_file(self) -> Path:
        return self.work / f"spark-crashes-{self.index}.txt"

    def paused(self) -> bool:
        return (self.pause_dir / PAUSED_FILE).exists()

    def release(self) -> None:
        (self.pause_dir / PAUSED_FILE).unlink(missing_ok=True)
        (self.pause_dir / RELEASE_FILE).touch()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    def kill(self, fault: Fault | None) -> None:
        """SIGKILL this life, for ``fault`` (None: it stalled)."""
        assert self.process is not None
        self.killed, self.killed_by = True, fault
        self.process.kill()

    def freeze(self) -> None:
        """SIGSTOP the life's process group (a SIGKILL still ends it)."""
        if self.process is not None:
            self.process.signal_group(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.process is not None:
            self.process.signal_group(signal.SIGCONT)

    def stop(self) -> int | None:
        return None if self.process is None else self.process.stop()

    def ended(self, outputs: int) -> Life | None:
        """The life that just ended (None while it runs)."""
        process = self.process
        if process is None or process.poll() is None:
            return None
        code = process.wait()
        armed = self.armed
        if self.killed:
            ending = Ending.KILLED
        elif code == -signal.SIGKILL:
            ending = Ending.CRASH_POINT if self._crashed_at_point(process) else (
                Ending.SIGKILL_UNEXPECTED)  # fmt: skip
        elif code == 0:
            ending = Ending.EXITED
        else:
            ending = Ending.CRASHED
        landed = ending is Ending.CRASH_POINT and armed is not None and armed.kills_worker
        fault = self.killed_by or (armed if landed else None)
        life = Life(self.index, self.lives, fault, landed or fault is not None, ending, code,
                    process.seconds, self.outputs_at_start, outputs)  # fmt: skip
        self.process = None
        return life

    def _crashed_at_point(self, process: ProcessGroup) -> bool:
        if self.armed is not None and self.armed.at_spark_step:
            file = self.spark_crash_file
            return file.exists() and bool(file.read_text().strip())
        return process.crashed_at_crash_point()
