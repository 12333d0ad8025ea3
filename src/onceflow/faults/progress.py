"""How a fault run sees the pipeline make progress: the ``Progress`` protocol (an
``OutputProbe`` is one) and ``Counter``, progress from a function that counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Progress(Protocol):
    """How the run sees the pipeline make progress: its outputs (see ``OutputProbe``)."""

    def count(self) -> int: ...

    @property
    def sees_writes(self) -> bool: ...

    def written(self) -> bool: ...

    def await_write(self, timeout: float) -> bool: ...


class Counter:
    """Progress from a function that counts (None while it cannot say: the last count)."""

    sees_writes = False

    def __init__(self, count: Callable[[], int | None], every_s: float = 1.0) -> None:
        self._count = count
        self._every = every_s
        self._last = 0
        self._at = 0.0

    def count(self) -> int:
        if time.monotonic() - self._at >= self._every:
            self._at = time.monotonic()
            counted = self._count()
            if counted is not None:
                self._last = counted
        return self._last

    def written(self) -> bool:
        return False

    def await_write(self, timeout: float) -> bool:
        time.sleep(timeout)
        return False
