"""Fault injection between the numbered steps of a pattern's flow.

Every pattern calls ``crash_points.reached("step_name")`` between its steps (the step names
are listed in each pattern's ``STEPS`` and in docs/patterns.md). By default nothing
happens. A chaos harness or a test arms a step, and the process SIGKILLs itself the N-th
time it reaches that step: no ``finally`` block, no flush, exactly like a crash.

Arm it in code (``CrashPoints({"after_db_commit": 3})``), or through the environment for a
worker process started by the harness::

    ONCEFLOW_CRASH_AT="after_db_commit:3"          # third time the step is reached
    ONCEFLOW_CRASH_AT="before_offset_commit,after_produce:2"

A callback can be given instead (``CrashPoints(callback=...)``) to observe or decide.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Mapping

ENV_VAR = "ONCEFLOW_CRASH_AT"


def kill_self() -> None:
    """SIGKILL this process (flush stderr first so the harness sees why)."""
    try:
        sys.stderr.flush()
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


class CrashPoints:
    """Counts steps reached; kills the process at an armed step's N-th occurrence."""

    def __init__(
        self,
        armed: Mapping[str, int] | None = None,
        callback: Callable[[str, int], None] | None = None,
    ) -> None:
        self.armed = dict(armed or {})
        self.callback = callback
        self.counts: Counter[str] = Counter()

    @classmethod
    def parse(cls, spec: str) -> dict[str, int]:
        armed: dict[str, int] = {}
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, count = item.partition(":")
            try:
                armed[name.strip()] = int(count) if count else 1
            except ValueError:
                raise ValueError(f"bad crash point {item!r}: expected STEP or STEP:N") from None
        return armed

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CrashPoints:
        spec = (environ if environ is not None else os.environ).get(ENV_VAR, "")
        return cls(cls.parse(spec))

    def reached(self, step: str) -> None:
        self.counts[step] += 1
        count = self.counts[step]
        if self.callback is not None:
            self.callback(step, count)
        if self.armed.get(step) == count:
            print(f"onceflow crash point: SIGKILL at {step} #{count}", file=sys.stderr)
            kill_self()


NO_CRASHES = CrashPoints()
