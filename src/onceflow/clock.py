"""The clocks the broker reads: wall-clock milliseconds (Kafka's timestamps) and a
monotonic clock in seconds (timeouts). Coordinators take a ``Clock`` so tests can set it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Clock:
    now_ms: Callable[[], int] = now_ms
    monotonic: Callable[[], float] = time.monotonic


SYSTEM_CLOCK = Clock()
