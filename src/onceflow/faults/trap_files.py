"""What the fault engine's two kinds of trap share: a directory of per-worker files
(``arm-<N>`` written whole, ``sprung-<N>`` once one springs) and which workers a fault's
trap is armed for (every one for ``@any``)."""

from __future__ import annotations

import os
from pathlib import Path

from onceflow.faults.schedule import ANY_WORKER, Fault


class TrapFiles:
    def __init__(self, directory: Path, workers: int = 1) -> None:
        self.directory = directory
        self.workers = workers
        self.generation = 0
        directory.mkdir(parents=True, exist_ok=True)

    def _of(self, fault: Fault) -> list[int]:
        """The workers a fault's trap is armed for (every one for ``@any``)."""
        return list(range(1, self.workers + 1)) if fault.worker == ANY_WORKER else [fault.worker]

    def _arm_each(self, fault: Fault, line: str, clear: tuple[str, ...]) -> None:
        """A new generation: for each of the fault's workers remove the ``clear`` files, then
        write ``arm-<N>`` (``line`` after the generation) whole."""
        self.generation += 1
        for worker in self._of(fault):
            self._remove(worker, *clear)
            arm = self.directory / f"arm-{worker}"
            partial = arm.with_name(arm.name + ".part")
            partial.write_text(f"{self.generation} {line}\n")
            os.replace(partial, arm)

    def _remove(self, worker: int, *names: str) -> None:
        for name in names:
            (self.directory / f"{name}-{worker}").unlink(missing_ok=True)

    def sprung(self, fault: Fault) -> int | None:
        """The worker whose trap for the fault sprang (None while none)."""
        for worker in self._of(fault):
            if (self.directory / f"sprung-{worker}").exists():
                return worker
        return None
