"""A partition's fsync state machine: how far it is durable and what an fsync covers.

Every fsync of a partition runs on a ``SyncTarget`` taken on the event loop (``target``)
and, in the broker, off it: ``LogManager``'s group commit runs them in a small pool of
fsync threads, and ``synced_to`` or the partition's ``sync_failed`` takes the outcome back
on the loop. A target covers every segment with bytes not yet durable, so a segment that
rolled is fsynced with the next fsync of its partition (whatever the flush policy, as
Kafka flushes a rolled segment in the background), then the directory for the new
segment's name, then the producer-state snapshot the roll took.

The synced point says how far the partition is durable: every segment before the one it
names is durable whole, and the one it names is the last one or has bytes not yet
durable. Under ``log.flush.policy=always`` the high watermark is the durable offset, so
acknowledgements and consumers wait for the fsync; under ``interval`` and ``os`` it is the
log end offset.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os

from onceflow.log.durability import open_directory, sync_file, write_atomically_in
from onceflow.log.durable_offsets import DurableWaiters, NewDataWaiters, SyncPoint, SyncTarget
from onceflow.log.partition_status import PartitionStatus
from onceflow.log.producer_state import ProducerStateManager, snapshot_name
from onceflow.log.segment_list import SegmentList, base_offset

log = logging.getLogger(__name__)


class Durability:
    def __init__(
        self,
        segments: SegmentList,
        status: PartitionStatus,
        waiters: DurableWaiters,
        new_data: NewDataWaiters,
        producers: ProducerStateManager,
    ) -> None:
        self._segments = segments
        self._status = status
        self._new_data = new_data
        self._producers = producers
        self.waiters = waiters  # its flushed offset: the high watermark under policy always
        self.synced = SyncPoint(0, 0, 0)
        self.generation = 0  # bumped whenever the log is reloaded after a cut
        self._new_name = False  # a segment file was created since the last directory fsync
        self._snapshots: list[tuple[int, bytes]] = []  # taken by rolls, not yet written

    @property
    def acknowledges_after_fsync(self) -> bool:
        return self._segments.config.broker["log.flush.policy"] == "always"

    @property
    def high_watermark(self) -> int:
        if self.acknowledges_after_fsync:
            return self.waiters.flushed_offset
        return self._segments.log_end_offset

    @property
    def unsynced(self) -> bool:
        return self.synced.offset < self._segments.log_end_offset or self.roll_unsynced

    @property
    def roll_unsynced(self) -> bool:
        """A roll left a segment's name or a snapshot to make durable: an fsync is due
        whatever the flush policy."""
        return self._new_name or bool(self._snapshots)

    def loaded(self) -> None:
        """The log was (re)loaded from its files: durable up to its end."""
        end = self._segments.log_end_offset
        active = self._segments.active
        self.synced = SyncPoint(end, active.base_offset, active.size)
        self.waiters.flushed_offset = end

    def reloading(self) -> None:
        """The files were cut: fsyncs started before no longer say anything, and rolls
        before the cut are reloaded as they are on disk."""
        self.generation += 1
        self._snapshots.clear()
        self._new_name = True

    def rolled(self, snapshot: bytes) -> None:
        """A new segment was created (its name not yet durable), starting where the producer
        state ``snapshot`` was taken."""
        self._new_name = True
        self._snapshots.append((self._segments.active.base_offset, snapshot))
        self.segments_changed()

    def segments_changed(self) -> None:
        """Segments were added or deleted: name the synced point by the segment it is in."""
        self.synced = self._normalized(self.synced)

    def _normalized(self, point: SyncPoint) -> SyncPoint:
        """The same point, named by the last segment it reaches into: a point at the end of
        a closed segment, or in one deleted since, moves to the start of the next one."""
        segments = self._segments.segments
        index = bisect.bisect_left(segments, point.segment_base, key=base_offset)
        if index < len(segments) and segments[index].base_offset == point.segment_base:
            if point.size < segments[index].size or index == len(segments) - 1:
                return point
            index += 1
        if index == len(segments):
            return point  # (a deleted partition)
        return SyncPoint(point.offset, segments[index].base_offset, 0)

    def target(self) -> SyncTarget:
        """What an fsync started now makes durable (on the loop)."""
        segments = self._segments
        synced = self.synced
        first = bisect.bisect_left(segments.segments, synced.segment_base, key=base_offset)
        files = tuple(
            segment.sync_handle()
            for segment in segments.segments[first:]
            if segment.base_offset != synced.segment_base or segment.size > synced.size
        )
        directory = None
        if self.roll_unsynced:
            directory = open_directory(segments.directory)
        active = segments.active
        point = SyncPoint(segments.log_end_offset, active.base_offset, active.size)
        target = SyncTarget(point, files, directory, tuple(self._snapshots), self.generation)
        self._new_name = False
        self._snapshots = []
        return target

    def sync(self, target: SyncTarget) -> None:
        """fsync what ``target`` covers, then write its snapshots; raises OSError if an
        fsync fails. Touches only the target's descriptors: safe off the event loop."""
        try:
            for fd in target.files:
                sync_file(fd)
            if target.directory is not None:
                os.fsync(target.directory)
                for offset, snapshot in target.snapshots:
                    self._write_snapshot(target.directory, offset, snapshot)
        finally:
            target.release()

    def _write_snapshot(self, directory: int, offset: int, snapshot: bytes) -> None:
        """A snapshot only saves start-up a replay: one that cannot be written is logged."""
        try:
            write_atomically_in(directory, snapshot_name(offset), snapshot)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile
        except OSError as error:
            log.error(
                "%s: cannot write the producer-state snapshot at offset %d (start-up will "
                "replay from an older one): %s",
                self._status.name,
                offset,
                error,
            )

    def synced_to(self, target: SyncTarget) -> None:
        """An fsync succeeded: everything before ``target`` is durable."""
        if target.generation != self.generation:
            return
        if target.snapshots:
            self._producers.prune_snapshots()
        self._status.fsync_succeeded()
        if target.point.offset <= self.synced.offset:
            return  # nothing new (the synced point may name a later segment already)
        self.synced = self._normalized(target.point)
        if self.acknowledges_after_fsync:
            self.mark_flushed(target.point.offset)

    def failed(self, target: SyncTarget, error: OSError) -> tuple[SyncPoint, str] | None:
        """An fsync failed: the point to cut the log back to and the error's message; None
        when the failure no longer matters (an older generation, an offline or deleted
        partition)."""
        status = self._status
        if target.generation != self.generation or status.offline or status.deleted:
            return None
        message = f"fsync of {status.name} failed: {error}"
        point = self.synced
        if status.fsync_failed(message):
            log.error(
                "%s; dropping the %d offsets after %d, which were never durable",
                message,
                self._segments.log_end_offset - point.offset,
                point.offset,
            )
        return point, message

    def mark_flushed(self, offset: int) -> None:
        if self.waiters.flushed(offset) and self.acknowledges_after_fsync:
            self._new_data.notify()

    def appended(self) -> None:
        """A batch was appended: without waiting for an fsync, it is readable at once."""
        if not self.acknowledges_after_fsync:
            self.mark_flushed(self._segments.log_end_offset)
            self._new_data.notify()

    def wait(self, offset: int) -> asyncio.Future[None]:
        """Resolves once every offset below ``offset`` is durable (acknowledgeable).

        Fails with KafkaError(KAFKA_STORAGE_ERROR) if the offsets are cut instead.
        """
        return self.waiters.wait(offset, self._status.offline_error())
