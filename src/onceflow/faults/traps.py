"""The fault engine's side of the embedded broker's request traps (onceflow.broker.traps):
arm a trap for a worker, see it spring, let the held request go on, see which APIs a
worker uses."""

from __future__ import annotations

from onceflow.broker.traps import ANY_EFFECT, EFFECTS, TRAPS_ENV
from onceflow.faults.schedule import REQUEST_TRIGGERS, Fault
from onceflow.faults.trap_files import TrapFiles

__all__ = ["TRAPS_ENV", "TrapControl"]

FETCH = 1


class TrapControl(TrapFiles):
    def arm(self, fault: Fault) -> None:
        key, phase = REQUEST_TRIGGERS[fault.trigger]
        self._arm_each(fault, f"{key} {fault.occurrence} {phase}", ("sprung", "release"))

    def disarm_all(self, fault: Fault, sprung: int | None = None) -> None:
        """Disarm the fault's traps; another worker's trap that sprang at the same time as
        ``sprung``'s lets its request go on (one fault, one worker)."""
        for worker in self._of(fault):
            if worker != sprung and (self.directory / f"sprung-{worker}").exists():
                self.release(worker)
            else:
                self.disarm(worker)

    def release(self, worker: int) -> None:
        self.disarm(worker)
        (self.directory / f"release-{worker}").touch()

    def disarm(self, worker: int) -> None:
        self._remove(worker, "arm", "sprung")

    def seen(self, fault: Fault) -> bool:
        """Has the fault's worker (any, for ``@any``) sent a request it catches at all?"""
        key, _ = REQUEST_TRIGGERS[fault.trigger]
        for worker in self._of(fault):
            used = self._used(worker)
            if used & EFFECTS if key == ANY_EFFECT else int(key) in used:
                return True
        return False

    def fetched(self, fault: Fault) -> bool:
        """Has the fault's worker (any, for ``@any``) fetched records (it owns partitions)?"""
        return any(FETCH in self._used(worker) for worker in self._of(fault))

    def topics(self) -> set[str]:
        """Every topic a worker asked Metadata about."""
        return {topic for path in self.directory.glob("topics-*")
                for topic in path.read_text().split()}  # fmt: skip

    def _used(self, worker: int) -> set[int]:
        try:
            return {int(k) for k in (self.directory / f"seen-{worker}").read_text().split()}
        except FileNotFoundError:
            return set()

    def sprung_api(self, worker: int) -> int:
        """The API key of the request the worker's trap holds."""
        return int((self.directory / f"sprung-{worker}").read_text().split()[0])
