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
    """With ``@any`` every worker's trap is armed: two workers can reach their N-th commit
    together and both stop themselves, but one is the fault's; the others are strays that
    the run lets go on (``strays``), or they would sit stopped, their group waiting for
    them until their sessions expire."""

    STRAY_S = 1.0  # a stray is sent SIGCONT this long (it may stop just after the first)
    # a worker that read its arm file before the disarm stops within this (a long wait for
    # the CPU on a loaded machine included)
    WATCH_S = 10.0

    def __init__(self, directory: Path, workers: int = 1) -> None:
        super().__init__(directory, workers)
        self.live: int | None = None  # the generation armed now, until it is disarmed
        self._strays_seen: dict[int, float] = {}
        # strays can only follow a disarm: the files are read from then, not at every step
        self._watching = False
        self._watch_from: float | None = None

    def arm(self, fault: Fault) -> None:
        self._arm_each(fault, str(fault.occurrence), ())  # strays' files stay: see strays
        self.live = self.generation

    def sprung(self, fault: Fault) -> int | None:
        """The worker whose trap for the armed fault sprang (None while none)."""
        if self.live is None:
            return None
        return next((w for w in self._of(fault) if self._sprang_in(w) == self.live), None)

    def disarm_all(self, fault: Fault, chosen: int | None = None) -> None:
        """No trap armed any more. ``chosen`` is the worker the fault takes: its sprung
        file goes, and any other worker's that remains, or appears, is a stray's."""
        for worker in self._of(fault):
            self._remove(worker, "arm")
        if chosen is not None:
            self._remove(chosen, "sprung")
        self.live = None
        self._watching, self._watch_from = True, None

    def strays(self, now: float) -> list[int]:
        """Workers that stopped themselves at a trap that is not (or no longer) the armed
        fault's: the run sends each SIGCONT for STRAY_S, then its file is forgotten. Looked
        for from a disarm until WATCH_S passed with none."""
        if not self._watching:
            return []
        if self._watch_from is None:
            self._watch_from = now
        found = []
        for worker in range(1, self.workers + 1):
            generation = self._sprang_in(worker)
            if generation is None or generation == self.live:
                self._strays_seen.pop(worker, None)
                continue
            first = self._strays_seen.setdefault(worker, now)
            if now - first > self.STRAY_S:
                self._remove(worker, "sprung")
                del self._strays_seen[worker]
            found.append(worker)
        if not found and now - self._watch_from > self.WATCH_S:
            self._watching = False
        return found

    def _sprang_in(self, worker: int) -> int | None:
        """The generation of the worker's sprung file (None: it has none)."""
        try:
            return int((self.directory / f"sprung-{worker}").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

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
