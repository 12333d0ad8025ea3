"""Group commit: the fsyncs of a broker's partitions, off the event loop.

Under ``log.flush.policy=always`` every append asks for an fsync of its partition; one
loop turn later an fsync starts, in a small pool of fsync threads, for every partition
asked for that has none in flight, and releases every append it covers, so concurrent
producers of a partition share its fsyncs and one partition's fsync never waits behind
another's. A partition appended to while its fsync runs gets one more fsync, for all
those appends, as soon as the running one ends. A segment roll asks for an fsync under
every policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from onceflow.log.durable_offsets import SyncTarget
from onceflow.log.partition_log import PartitionLog
from onceflow.timings import Timings

FSYNC_THREADS = 4  # partitions fsynced at the same time


class GroupCommit:
    def __init__(self, always: Callable[[], bool]) -> None:
        self._always = always  # log.flush.policy=always: every append waits for an fsync
        self._dirty: set[PartitionLog] = set()
        # At most one fsync per partition in flight.
        self._flushing: dict[PartitionLog, asyncio.Future[None]] = {}
        self._flush_scheduled = False
        self._pool: ThreadPoolExecutor | None = None
        self.fsync_times = Timings()  # Kafka's LogFlushRateAndTimeMs

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(FSYNC_THREADS, thread_name_prefix="fsync")

    async def stop(self, partitions: Iterable[PartitionLog]) -> None:
        """fsync what is not durable yet, then end the fsync threads."""
        await self.flush_all(partitions)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def appended(self, partition: PartitionLog) -> None:
        """Called after every append: fsync it soon under policy always, or under any
        policy once a segment rolled."""
        if self._always() or partition.durability.roll_unsynced:
            self._dirty.add(partition)
            if not self._flush_scheduled and self._pool is not None:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._start_flushes)

    def forget(self, partition: PartitionLog) -> None:
        """A deleted partition needs no more fsyncs."""
        self._dirty.discard(partition)

    async def flush_all(self, partitions: Iterable[PartitionLog]) -> None:
        """fsync every partition with unsynced data (after any fsync already in flight)."""
        while self._flushing:
            await asyncio.gather(*self._flushing.values())
        self._dirty.update(p for p in partitions if p.durability.unsynced)
        self._start_flushes()
        while self._flushing:
            await asyncio.gather(*self._flushing.values())

    def _start_flushes(self) -> None:
        """Start an fsync for every dirty partition that has none in flight.

        Runs one loop turn after the appends that marked partitions dirty, so every
        append of that turn shares the fsync. A partition dirtied again while its fsync
        runs waits for that one to end and is then fsynced once for all its new appends.
        """
        self._flush_scheduled = False
        if self._pool is None:
            return
        loop = asyncio.get_running_loop()
        for partition in list(self._dirty):
            if partition in self._flushing:
                continue
            self._dirty.discard(partition)
            if partition.deleted or partition.offline or not partition.durability.unsynced:
                continue
            done: asyncio.Future[None] = loop.create_future()
            self._flushing[partition] = done
            target = partition.durability.target()
            self._pool.submit(self._fsync_in_thread, loop, partition, target, done)

    def _fsync_in_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        partition: PartitionLog,
        target: SyncTarget,
        done: asyncio.Future[None],
    ) -> None:
        """Runs in an fsync thread; hands the outcome straight back to the loop."""
        error: OSError | None = None
        started = time.monotonic()
        try:
            partition.durability.sync(target)
        except OSError as failure:
            error = failure
        finally:
            took = time.monotonic() - started
            loop.call_soon_threadsafe(self._flushed, partition, target, error, done, took)

    def _flushed(
        self,
        partition: PartitionLog,
        target: SyncTarget,
        error: OSError | None,
        done: asyncio.Future[None],
        took: float,
    ) -> None:
        del self._flushing[partition]
        self.fsync_times.observe(took)
        if error is None:
            partition.durability.synced_to(target)
        else:
            partition.sync_failed(target, error)
        done.set_result(None)
        if partition in self._dirty and not self._flush_scheduled:
            self._start_flushes()
