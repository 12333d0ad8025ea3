"""Give freed heap memory back to the system after many connections have closed.

glibc keeps memory freed by ``free`` in its heap for reuse; pages of it that sit below
memory still in use are only returned by ``malloc_trim``. After a burst of closed
connections this gives back about a third of what they used (measured with 10,000:
docs/broker.md); the rest is Python's own allocator keeping partly used arenas, which
later connections reuse. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
from collections.abc import Callable

TRIM_AFTER_CLOSES = 1000  # closed connections that make a trim worth its few milliseconds
TRIM_DELAY_SECONDS = 1.0  # let the rest of a burst close first


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


class TrimAfterCloses:
    def __init__(self) -> None:
        self._closes = 0
        self._scheduled = False

    def closed(self) -> None:
        self._closes += 1
        if self._closes >= TRIM_AFTER_CLOSES and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_later(TRIM_DELAY_SECONDS, self._trim)

    def _trim(self) -> None:
        self._scheduled = False
        self._closes = 0
        trim = _malloc_trim()
        if trim is not None:
            trim(0)
