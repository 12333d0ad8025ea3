"""The fault engine's side of the database commit traps a Python pipeline runs
(``faults/pyhooks/sitecustomize.py``): arm one for a worker, see it spring (the worker
stopped itself right after a commit that wrote its outputs), see whether a worker makes
such commits at all."""

from __future__ import annotations

import os
from pathlib import Path

from onceflow.faults.schedule import Fault
from onceflow.faults.trap_files import TrapFiles

HOOKS = Path(__file__).resolve().parent / "pyhooks"  # put first on the pipeline's PYTHONPATH
TRAPS_ENV = "ONCEFLOW_COMMIT_TRAPS"
TABLES_ENV = "ONCEFLOW_COMMIT_TRAP_TABLES"


def pipeline_environment(directory: Path, tables: list[str], env: dict[str, str]) -> None:
    """What a Python pipeline needs in its environment to run the commit traps."""
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{HOOKS}{os.pathsep}{path}" if path else str(HOOKS)
    env[TRAPS_ENV] = str(directory)
    env[TABLES_ENV] = ",".join(tables)


class CommitTrapControl(TrapFiles):
    def arm(self, fault: Fault) -> None:
        self._arm_each(fault, str(fault.occurrence), ("sprung",))

    def disarm_all(self, fault: Fault) -> None:
        for worker in self._of(fault):
            self._remove(worker, "arm", "sprung")

    def busiest(self) -> int | None:
        """The worker that committed outputs last (None: none has yet)."""
        times = {}
        for worker in range(1, self.workers + 1):
            try:
                times[worker] = (self.directory / f"seen-{worker}").stat().st_mtime_ns
            except FileNotFoundError:
                pass
        return max(times, key=times.__getitem__) if times else None

    def seen(self, fault: Fault) -> bool:
        """Has the fault's worker (any, for ``@any``) committed its outputs through a
        Python sqlite3 connection yet?"""
        return any((self.directory / f"seen-{w}").exists() for w in self._of(fault))
