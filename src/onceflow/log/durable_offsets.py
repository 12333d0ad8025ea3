"""How far a partition is durable, and the requests waiting for it to get further.

An fsync runs off the event loop on a ``SyncTarget`` taken on it; when it succeeds the
partition is durable up to the target's ``SyncPoint``. ``DurableWaiters`` resolves each
waiting request once its offsets are durable, or fails it when they are cut instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from onceflow.log.segment import LogSegment
from onceflow.protocol.errors import KafkaError


@dataclass(slots=True, frozen=True)
class SyncPoint:
    """How far a partition is durable: every offset below ``offset``, the first ``size``
    bytes of the segment based at ``segment_base``."""

    offset: int
    segment_base: int
    size: int


@dataclass(slots=True, frozen=True)
class SyncTarget:
    """An fsync about to run off the event loop, and what it will make durable."""

    point: SyncPoint
    segment: LogSegment
    generation: int


class DurableWaiters:
    def __init__(self) -> None:
        self.flushed_offset = 0  # every offset below it is acknowledgeable
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    def wait(self, offset: int, offline: KafkaError | None) -> asyncio.Future[None]:
        """Resolves once every offset below ``offset`` is durable; fails at once with
        ``offline`` if given, or later if the offsets are cut."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if offset <= self.flushed_offset:
            future.set_result(None)
        elif offline is not None:
            future.set_exception(offline)
        else:
            self._waiting.append((offset, future))
        return future

    def flushed(self, offset: int) -> bool:
        """Offsets below ``offset`` are durable; whether that is news."""
        if offset <= self.flushed_offset:
            return False
        self.flushed_offset = offset
        self._settle(lambda target: target <= offset, None)
        return True

    def fail_above(self, durable_offset: int, error: KafkaError) -> None:
        """Fail every wait for offsets beyond ``durable_offset`` (they were cut)."""
        self._settle(lambda target: target > durable_offset, error)

    def _settle(self, done, error: KafkaError | None) -> None:
        still_waiting = []
        for target, future in self._waiting:
            if not done(target):
                still_waiting.append((target, future))
            elif future.done():
                continue
            elif error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
        self._waiting = still_waiting
