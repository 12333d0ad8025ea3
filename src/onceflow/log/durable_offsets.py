"""How far a partition is durable, and the requests waiting for it to get further or for
new records to arrive.

An fsync runs off the event loop on a ``SyncTarget`` taken on it; when it succeeds the
partition is durable up to the target's ``SyncPoint``. ``DurableWaiters`` resolves each
waiting request once its offsets are durable, or fails it when they are cut instead.
``NewDataWaiters`` wakes long-polling fetches when the readable end moves.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from onceflow.protocol.errors import KafkaError


@dataclass(slots=True, frozen=True)
class SyncPoint:
    """How far a partition is durable: every offset below ``offset``, the first ``size``
    bytes of the segment based at ``segment_base`` (and every segment before it)."""

    offset: int
    segment_base: int
    size: int


@dataclass(slots=True, frozen=True)
class SyncTarget:
    """An fsync about to run off the event loop, and what it will make durable.

    ``files`` (the segments with bytes not yet durable) and ``directory`` (the partition's
    directory, when a segment file was created or a snapshot is due) are descriptors of
    their own, closed by the fsync: a segment or a partition deleted meanwhile cannot make
    the fsync fail, nor have it reach another file or a new directory of the same name.
    ``snapshots``: producer-state snapshots (offset, content) that segment rolls left to
    write once the offsets before them are durable.
    """

    point: SyncPoint
    files: tuple[int, ...]
    directory: int | None
    snapshots: tuple[tuple[int, bytes], ...]
    generation: int

    def release(self) -> None:
        """Close the target's descriptors (the fsync does)."""
        for fd in self.files:
            os.close(fd)
        if self.directory is not None:
            os.close(self.directory)


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


class NewDataWaiters:
    """Long-polling fetches waiting for the partition's readable end to move."""

    def __init__(self) -> None:
        self._waiting: list[asyncio.Future[None]] = []

    def waiter(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return future

    def discard(self, future: asyncio.Future[None]) -> None:
        if not future.done():
            future.cancel()
            self._waiting = [waiter for waiter in self._waiting if waiter is not future]

    def notify(self) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)
