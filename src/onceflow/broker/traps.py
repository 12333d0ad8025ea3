"""Request traps: hold one client's N-th request of a kind at a chosen moment, for the fault
engine (``onceflow prove``, tests). Off unless ``ONCEFLOW_BROKER_TRAPS`` names a directory.

A pipeline under proof is a black box, but every effect it has on Kafka is a request
this broker serves. A trap stops the N-th request of one API from one worker either
*sent* (received, not applied: the worker's process may die before its offset commit
reaches the broker) or *applied* (durable, its answer not yet sent: the producer never
learns that its batch was written). The fault engine then does its fault (SIGKILLs the
worker, the broker, cuts the network) and lets the request go on, or the worker dies and
the request is dropped unapplied.

Workers are told apart by listener: the connections of worker N come in on a listener
named ``W<N>``. The files in the directory (written atomically):

* ``arm-<N>``, by the fault engine: ``<generation> <api key> <occurrence> sent|applied``;
  counting starts when a new generation appears (the file is read on every request of
  worker N: a file's times and inode can repeat within a clock tick); API key ``*`` is any
  request with an effect (produce, offset commits, AddOffsetsToTxn, EndTxn);
* ``sprung-<N>``, by the broker: the API key of the request it holds, its occurrence and
  phase, once it holds one;
* ``release-<N>``, by the fault engine: let the held request go on;
* ``seen-<N>``, by the broker: one line per API key worker N has used so far;
* ``topics-<N>``, by the broker: one line per topic worker N asked Metadata about.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TRAPS_ENV = "ONCEFLOW_BROKER_TRAPS"
ANY_EFFECT = "*"
EFFECTS = frozenset(
    {0, 8, 25, 26, 28}
)  # Produce, OffsetCommit, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
SENT, APPLIED = "sent", "applied"
WORKER_LISTENER = re.compile(r"W(\d+)")
HOLD_POLL_S = 0.005
HOLD_LIMIT_S = 120.0


@dataclass(slots=True)
class Trap:
    worker: int
    api: str  # an API key, or ANY_EFFECT
    occurrence: int
    phase: str
    api_key: int = -1  # the held request's

    def catches(self, api_key: int) -> bool:
        return api_key in EFFECTS if self.api == ANY_EFFECT else int(self.api) == api_key

    @property
    def line(self) -> str:
        return f"{self.api_key} {self.occurrence} {self.phase}\n"


@dataclass(slots=True)
class _Armed:
    generation: str | None = None
    trap: Trap | None = None
    count: int = 0


@dataclass
class RequestTraps:
    directory: Path
    _armed: dict[int, _Armed] = field(default_factory=dict)
    _seen: dict[int, set[int]] = field(default_factory=dict)
    _topics: dict[int, set[str]] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> RequestTraps | None:
        directory = os.environ.get(TRAPS_ENV)
        return cls(Path(directory)) if directory else None

    @staticmethod
    def worker_of(listener: str) -> int | None:
        match = WORKER_LISTENER.fullmatch(listener)
        return int(match[1]) if match else None

    def match(self, worker: int, api_key: int) -> Trap | None:
        """The trap this request springs, if any (counts it, and notes the API as seen)."""
        self._note_seen(worker, api_key)
        armed = self._armed.setdefault(worker, _Armed())
        self._reload(worker, armed)
        trap = armed.trap
        if trap is None or not trap.catches(api_key):
            return None
        armed.count += 1
        if armed.count != trap.occurrence:
            return None
        armed.trap = None
        trap.api_key = api_key
        return trap

    def _reload(self, worker: int, armed: _Armed) -> None:
        try:
            generation, api, occurrence, phase = (
                (self.directory / f"arm-{worker}").read_text().split()
            )
        except (FileNotFoundError, ValueError):
            armed.generation, armed.trap = None, None
            return
        if generation == armed.generation:
            return
        armed.generation, armed.count = generation, 0
        armed.trap = Trap(worker, api, int(occurrence), phase)

    def asked_about(self, worker: int, topics: list[str]) -> None:
        """Worker N asked Metadata about these topics."""
        known = self._topics.setdefault(worker, set())
        new = [topic for topic in topics if topic not in known]
        if new:
            known.update(new)
            with open(self.directory / f"topics-{worker}", "a", encoding="utf-8") as file:
                file.writelines(f"{topic}\n" for topic in new)

    def _note_seen(self, worker: int, api_key: int) -> None:
        seen = self._seen.setdefault(worker, set())
        if api_key not in seen:
            seen.add(api_key)
            with open(self.directory / f"seen-{worker}", "a", encoding="utf-8") as file:
                file.write(f"{api_key}\n")

    async def hold(self, trap: Trap, peer_gone: Callable[[], bool]) -> bool:
        """Say the trap sprang and hold until released (True), or until the client is gone
        or the limit passes (False: the request is dropped)."""
        sprung = self.directory / f"sprung-{trap.worker}"
        partial = sprung.with_name(sprung.name + ".part")
        partial.write_text(trap.line)
        os.replace(partial, sprung)
        release = self.directory / f"release-{trap.worker}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HOLD_LIMIT_S
        while loop.time() < deadline:
            if release.exists():
                release.unlink(missing_ok=True)
                return True
            if peer_gone():
                return False
            await asyncio.sleep(HOLD_POLL_S)
        return False
