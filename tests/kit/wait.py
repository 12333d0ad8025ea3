"""Waiting for a condition, the one way the tests do it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T], timeout: float = 60.0, interval: float = 0.1, what: str = ""
) -> T:
    """Call ``check`` until it returns something truthy and return that; fail after
    ``timeout`` seconds, naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{what or 'condition'} not met within {timeout}s (last value: {last!r})"
            )
        time.sleep(interval)
