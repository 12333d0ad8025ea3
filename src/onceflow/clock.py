"""The clocks the broker reads: wall-clock milliseconds (Kafka's timestamps), a monotonic
clock in seconds (timeouts) and the pauses a coordinator takes between retries.
Coordinators take a ``Clock``; tests give them a ``ManualClock``'s, which moves only when
the test advances it."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Clock:
    now_ms: Callable[[], int] = now_ms
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


SYSTEM_CLOCK = Clock()


class ManualClock:
    """Time that stands still until ``advance`` moves it: ``sleep`` returns once the clock
    has been advanced past the sleep's end (in the order the sleeps end), never by itself.
    Both readings start at arbitrary, fixed values."""

    def __init__(self, start_ms: int = 1_700_000_000_000, start_monotonic: float = 1_000.0):
        self._elapsed = 0.0
        self._start_ms = start_ms
        self._start_monotonic = start_monotonic
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._pausing: asyncio.Event | None = None
        self.clock = Clock(now_ms=self.now_ms, monotonic=self.monotonic, sleep=self.sleep)

    def now_ms(self) -> int:
        return self._start_ms + round(self._elapsed * 1000)

    def monotonic(self) -> float:
        return self._start_monotonic + self._elapsed

    async def sleep(self, seconds: float) -> None:
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._elapsed + seconds, next(self._order), wake)
        heapq.heappush(self._sleepers, entry)
        self._event().set()
        try:
            await wake
        finally:
            if entry in self._sleepers:  # cancelled while asleep
                self._sleepers.remove(entry)
                heapq.heapify(self._sleepers)
                if not self._sleepers:
                    self._event().clear()

    def advance(self, seconds: float) -> None:
        """Move time on; the sleeps that end by then resume at the caller's next await."""
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, wake = heapq.heappop(self._sleepers)
            if not wake.done():
                wake.set_result(None)
        if not self._sleepers:
            self._event().clear()

    async def paused(self) -> float:
        """Wait until a task pauses (sleeps) on this clock; how long until the first pause
        ends."""
        await self._event().wait()
        return self._sleepers[0][0] - self._elapsed

    def _event(self) -> asyncio.Event:
        if self._pausing is None:
            self._pausing = asyncio.Event()
        return self._pausing
