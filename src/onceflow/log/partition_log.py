"""A partition's durable log: segments, offsets, producer state and transaction markers.

Every append (client batches, control markers, the coordinators' records) goes through
``_append``, the one durable-append path: a failed write is cut back and answers
KAFKA_STORAGE_ERROR; ``wait_durable`` resolves once an fsync covers the offset, or fails
with KAFKA_STORAGE_ERROR when a failed fsync made the partition drop its unsynced tail.

Start-up recovery (:mod:`tail_recovery`) trusts what the recovery point says was durable
and cuts only an invalid tail after it.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from onceflow.clock import now_ms
from onceflow.config import TopicConfig
from onceflow.log import retention
from onceflow.log.batch import (
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    BatchHeader,
    Bytes,
    KeyValue,
    assign_offset,
    build_batch,
    build_control_batch,
    offset_prefix,
    parse_header,
    set_log_append_time,
)
from onceflow.log.durability import sync_directory, write_atomically
from onceflow.log.durable_offsets import DurableWaiters, SyncPoint, SyncTarget
from onceflow.log.partition_reads import PartitionReads, base_offset
from onceflow.log.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
)
from onceflow.log.recovery import QUARANTINE_DIR
from onceflow.log.segment import (
    CutBackFailed,
    LogSegment,
    OffsetRules,
    SegmentDamaged,
    gaps_allowed,
)
from onceflow.log.tail_recovery import (
    PartitionOffline,
    TailCut,
    damage_reason,
    read_known_gaps,
    rebuild_producer_state,
    recover_segments,
)
from onceflow.log.txn_index import AbortedTxn, TxnIndexFiles
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def storage_error(message: str) -> KafkaError:
    return KafkaError(ErrorCode.kafka_storage_error, message)


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    duplicate: bool = False


class PartitionLog(PartitionReads):
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: TopicConfig,
        *,
        recovery_point: int | None = None,
        quarantine_root: Path | None = None,
        on_append: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.durable = DurableWaiters()  # its flushed offset: the high watermark under
        # log.flush.policy=always
        self.synced = SyncPoint(0, 0, 0)
        # Offsets below it were durable when the broker last recorded it (None: unknown).
        self.recovery_point = recovery_point
        self.generation = 0  # bumped whenever the log is reloaded after a cut
        self.offline: str | None = None  # why the partition is offline, if it is
        self.damaged = False  # offline because its stored data is damaged
        self.producers = ProducerStateManager(directory)
        self.aborted: list[AbortedTxn] = []  # sorted by last_offset
        self._waiters: list[asyncio.Future[None]] = []
        self.txn_index = TxnIndexFiles(directory)
        self._quarantine_root = quarantine_root or directory.parent / QUARANTINE_DIR
        self._on_append = on_append
        self._failing: str | None = None  # the storage error of the current episode
        self.deleted = False
        # Transactions ended by a marker the high watermark has not passed yet, as
        # (first offset, marker offset): still unstable, as in Kafka, so that a
        # read_committed reader gets their records and the marker together.
        self._ending: list[tuple[int, int]] = []
        self.cuts: list[TailCut] = []  # what recovery cut from this log, with copies

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # -- properties -----------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def durable_on_append(self) -> bool:
        return self.config.broker["log.flush.policy"] == "always"

    @property
    def high_watermark(self) -> int:
        return self.durable.flushed_offset if self.durable_on_append else self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        high_watermark = self.high_watermark
        if self._ending:
            self._ending = [ending for ending in self._ending if ending[1] >= high_watermark]
        firsts = [first for first, _ in self._ending]
        unstable = self.producers.first_unstable_offset()
        if unstable is not None:
            firsts.append(unstable)
        return min([high_watermark, *firsts])

    @property
    def gaps_allowed(self) -> bool:
        """Compaction may have removed batches: offsets need only increase."""
        return gaps_allowed(self.directory, self.config)

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    # -- loading and recovery -------------------------------------------------------------

    def load(self) -> None:
        created = not self.directory.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        if created:
            sync_directory(self.directory.parent)
        for leftover in self.directory.glob("*.cleaned"):  # a compaction cut short
            leftover.unlink()
        # Without a recovery point every batch is checked, as after Kafka's unclean shutdown.
        self._open(crc_from_offset=0 if self.recovery_point is None else self.recovery_point)

    def _open(self, crc_from_offset: int | None) -> None:
        bases = sorted(int(path.stem) for path in self.directory.glob("*.log"))
        checkpoint = self._read_checkpoint()
        if not bases:
            bases = [checkpoint.get("log_start_offset", 0)]
        interval = self.config["index.interval.bytes"]
        gaps = self.gaps_allowed
        self.segments = [
            LogSegment(self.directory, base, interval, gaps_allowed=gaps) for base in bases
        ]
        try:
            headers = recover_segments(
                self.segments,
                self.name,
                crc_from_offset,
                self.recovery_point,
                self._quarantine_root,
                self.txn_index.drop_from,
                read_known_gaps(self.directory),
                self.cuts,
            )
        except PartitionOffline as offline:
            self._go_offline(offline.reason, damaged=offline.damaged)
            return
        self.log_start_offset = max(
            checkpoint.get("log_start_offset", 0), self.segments[0].base_offset
        )
        self.aborted = sorted(
            self.txn_index.drop_from(self.log_end_offset), key=lambda txn: txn.last_offset
        )
        self._rebuild_producer_state(headers)
        if crc_from_offset is not None:  # loading, not reloading what is already synced
            self.active.flush()  # what survived a crash in the page cache is durable now
        self.synced = SyncPoint(self.log_end_offset, self.active.base_offset, self.active.size)
        self.durable.flushed_offset = self.log_end_offset

    def _go_offline(self, reason: str, damaged: bool = False) -> None:
        """Serve nothing more from this partition; logged once, at ERROR (the first reason
        stays the reason). ``damaged``: because its stored data is damaged."""
        if self.offline:
            return
        self.offline = reason
        self.damaged = damaged
        log.error("partition %s is offline: %s", self.name, reason)
        self.durable.fail_above(-1, storage_error(f"partition {self.name} is offline: {reason}"))
        self.notify()

    def require_online(self, reading: bool = False) -> None:
        """Raise KafkaError(KAFKA_STORAGE_ERROR) if the partition is offline; a read of a
        partition offline for damaged data gets CORRUPT_MESSAGE (see ``PartitionReads``)."""
        if not self.offline:
            return
        message = f"partition {self.name} is offline: {self.offline}"
        if reading and self.damaged:
            raise KafkaError(ErrorCode.corrupt_message, message)
        raise storage_error(message)

    def _rebuild_producer_state(self, headers: list[BatchHeader]) -> None:
        self.aborted = rebuild_producer_state(
            self.producers,
            headers,
            self.log_end_offset,
            self.aborted,
            lambda header: self._segment_for(header.base_offset).read(header.position, header.size),
            self._write_txn_entry,
        )

    def _checkpoint_path(self) -> Path:
        return self.directory / "partition.json"

    def _read_checkpoint(self) -> dict:
        try:
            return json.loads(self._checkpoint_path().read_text())
        except (OSError, ValueError):
            return {}

    def _write_checkpoint(
        self, log_start_offset: int | None = None, skipped: list[list[int]] | None = None
    ) -> None:
        start = self.log_start_offset if log_start_offset is None else log_start_offset
        checkpoint: dict = {"log_start_offset": start}
        known = sorted(read_known_gaps(self.directory)) if skipped is None else skipped
        if known:
            checkpoint["skipped_offsets"] = [list(gap) for gap in known]
        write_atomically(self._checkpoint_path(), json.dumps(checkpoint).encode())

    def skip_to(self, offset: int) -> None:
        """Continue the log at ``offset``, never reusing the offsets before it (after a
        repair cut offsets that consumers may have read). The skip is recorded in
        ``partition.json`` before the new segment exists, so recovery accepts the gap."""
        end = self.log_end_offset
        if offset <= end:
            return
        gaps = sorted(read_known_gaps(self.directory) | {(end, offset)})
        self._write_checkpoint(skipped=[list(gap) for gap in gaps])
        self.sync_now()
        segment = LogSegment(
            self.directory,
            offset,
            self.config["index.interval.bytes"],
            gaps_allowed=self.gaps_allowed,
        )
        self.segments.append(segment)
        sync_directory(self.directory)
        self.synced = SyncPoint(offset, offset, 0)
        self.durable.flushed_offset = offset

    def _write_txn_entry(self, txn: AbortedTxn) -> None:
        self.txn_index.append(self._segment_for(txn.last_offset).base_offset, txn)

    # -- appending ------------------------------------------------------------------------

    def append_client_batch(
        self, data: bytes, header: BatchHeader, transactions_v2: bool = False
    ) -> AppendResult:
        """Append one validated producer batch; duplicates return their original offsets.
        ``transactions_v2``: a transactional batch of Produce v12+ (KIP-890)."""
        if header.has_producer_id:
            duplicate = self.producers.check(header, transactions_v2)
            if duplicate is not None:
                return self._duplicate_result(duplicate)
        base_offset = self.log_end_offset
        log_append_time = -1
        if self.config["message.timestamp.type"] == "LogAppendTime":
            patched = assign_offset(data, base_offset)
            log_append_time = now_ms()
            set_log_append_time(patched, log_append_time)
            stored = parse_header(patched)
            self._append((patched,), stored)
        else:
            # The records are written from the request's buffer: only the prefix changes.
            prefix = offset_prefix(data, base_offset)
            stored = dataclasses.replace(header, base_offset=base_offset, leader_epoch=0)
            self._append((prefix, memoryview(data)[len(prefix) :]), stored)
        self.producers.on_append(stored)
        return AppendResult(base_offset, stored.last_offset, log_append_time)

    def _duplicate_result(self, original: BatchMetadata) -> AppendResult:
        return AppendResult(original.first_offset, original.last_offset, -1, duplicate=True)

    def append_marker(
        self, producer_id: int, producer_epoch: int, control_type: int, coordinator_epoch: int
    ) -> CompletedTxn | None:
        """Write a COMMIT or ABORT control batch ending the producer's transaction.

        Refused, as Kafka refuses it, when the producer epoch is older than the last this
        partition saw (INVALID_PRODUCER_EPOCH) or the coordinator epoch is
        (TRANSACTION_COORDINATOR_FENCED).

        An abort's entry in the transaction index is made durable before the marker is
        appended (a producer-state snapshot may later skip the marker), and removed again
        if the marker cannot be appended.
        """
        self.require_online()
        self.producers.check_end_marker(producer_id, producer_epoch, coordinator_epoch)
        offset = self.log_end_offset
        data = build_control_batch(
            offset, producer_id, producer_epoch, control_type, coordinator_epoch, now_ms()
        )
        header = parse_header(data)
        aborted = None
        if control_type == CONTROL_ABORT:
            first = self.producers.open_transaction(producer_id)
            if first is not None:
                aborted = AbortedTxn(
                    producer_id, first, offset, self._stable_after(producer_id, offset)
                )
                try:
                    self._write_txn_entry(aborted)
                except OSError as error:
                    raise self._write_failed(error) from None
        try:
            self._append((data,), header)
        except KafkaError:
            if aborted is not None:
                self.txn_index.drop_from(offset)
            raise
        completed = self.producers.on_marker(
            header, control_type == CONTROL_ABORT, coordinator_epoch
        )
        if completed is not None:
            self._ending.append((completed.first_offset, completed.last_offset))
        if aborted is not None:
            self.aborted.append(aborted)
        self.notify()
        return completed

    def _stable_after(self, producer_id: int, marker_offset: int) -> int:
        """The last stable offset once ``producer_id``'s transaction is ended by a marker."""
        others = [first for pid, first in self.producers.ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    def append_records(
        self,
        records: list[KeyValue],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> int:
        """Append key/value records written by the broker itself (internal topics).

        With a producer id the batch is transactional: it belongs to that producer's open
        transaction on this partition until a marker ends it (TxnOffsetCommit uses this).
        Returns the base offset.
        """
        base_offset = self.log_end_offset
        attributes = ATTR_TRANSACTIONAL if producer_id >= 0 else 0
        data = build_batch(
            base_offset,
            records,
            now_ms(),
            attributes=attributes,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        header = parse_header(data)
        if producer_id >= 0:
            self.producers.check_marker(producer_id, producer_epoch)
        self._append((data,), header)
        self.producers.on_append(header)
        return base_offset

    def iter_batches(self, start_offset: int | None = None):
        """Yield (header, batch bytes) for every batch from ``start_offset`` (replay)."""
        self.require_online()
        offset = self.log_start_offset if start_offset is None else start_offset
        try:
            for segment in self.segments:
                if segment.next_offset <= offset:
                    continue
                for header in segment.headers_from(offset):
                    data = segment.read(header.position, header.size)
                    header = parse_header(data)
                    yield header, data
        except SegmentDamaged as damage:
            raise self.found_damage(damage, "a replay") from None

    def _append(self, parts: Sequence[Bytes], header: BatchHeader) -> None:
        """The one append path: write one batch (one writev) or leave no trace of it.

        Raises KafkaError(KAFKA_STORAGE_ERROR) when the write fails; the segment is then
        as it was before. Asks for an fsync of what was written (``on_append``).
        """
        if self.deleted:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{self.topic} was deleted")
        self.require_online()
        try:
            self._maybe_roll(header)
            self.active.append_parts(parts, header)
        except CutBackFailed as error:
            self._go_offline(f"a failed write could not be removed: {error}")
            raise storage_error(self.offline or str(error)) from None
        except OSError as error:
            raise self._write_failed(error) from None
        if self._failing is not None:
            log.warning("%s: writes succeed again (after: %s)", self.name, self._failing)
            self._failing = None
        if not self.durable_on_append:
            self.mark_flushed(self.log_end_offset)  # acknowledged without waiting for an fsync
            self.notify()
        if self._on_append is not None:
            self._on_append(self)

    def _write_failed(self, error: OSError) -> KafkaError:
        """Log the first failure of an episode (path, errno); the error to answer."""
        message = f"cannot write to {self.name}: {error}"
        if self._failing is None:
            log.error("%s; the request is refused and nothing of it is kept", message)
        self._failing = message
        return storage_error(message)

    def _maybe_roll(self, header: BatchHeader) -> None:
        active = self.active
        if active.size == 0:
            return
        too_big = active.size + header.size > self.config["segment.bytes"]
        # Like Kafka: the new batch's timestamp against the segment's first one, so that
        # historical (old CreateTime) data does not roll a segment per batch.
        too_old = (
            active.created_ms is not None
            and header.max_timestamp - active.created_ms > self.config["segment.ms"]
        )
        if too_big or too_old:
            self.roll()

    def roll(self) -> None:
        old = self.active
        self.sync_now()
        base = old.next_offset
        self.producers.write_snapshot(base)
        segment = LogSegment(
            self.directory,
            base,
            self.config["index.interval.bytes"],
            gaps_allowed=self.gaps_allowed,
        )
        self.segments.append(segment)
        self.synced = SyncPoint(base, base, 0)

    # -- durability -----------------------------------------------------------------------

    @property
    def unsynced(self) -> bool:
        return self.synced.offset < self.log_end_offset

    def sync_target(self) -> SyncTarget:
        """What an fsync of the active segment started now makes durable (on the loop)."""
        active = self.active
        point = SyncPoint(self.log_end_offset, active.base_offset, active.size)
        return SyncTarget(point, active, self.generation)

    @staticmethod
    def sync(target: SyncTarget) -> None:
        """fsync the target's segment; raises OSError. Safe off the event loop."""
        target.segment.flush()

    def sync_now(self) -> None:
        """fsync on the calling thread; on failure drop the unsynced tail and raise."""
        target = self.sync_target()
        try:
            self.sync(target)
        except OSError as error:
            self.sync_failed(target, error)
            raise storage_error(f"fsync of {self.name} failed: {error}") from None
        self.synced_to(target)

    def synced_to(self, target: SyncTarget) -> None:
        """An fsync succeeded: everything before ``target`` is durable."""
        if target.generation != self.generation or target.point.offset < self.synced.offset:
            return
        self.synced = target.point
        if self._failing is not None and self._failing.startswith("fsync"):
            log.warning("%s: fsync succeeds again", self.name)
            self._failing = None
        if self.durable_on_append:
            self.mark_flushed(target.point.offset)

    def sync_failed(self, target: SyncTarget, error: OSError) -> None:
        """An fsync failed: its pages may be gone, so drop everything not known durable.

        The log is cut back to the last successful fsync and reloaded from disk; the
        requests waiting for the cut offsets fail with KAFKA_STORAGE_ERROR.
        """
        if target.generation != self.generation or self.offline or self.deleted:
            return
        point = self.synced
        lost = self.log_end_offset - point.offset
        message = f"fsync of {self.name} failed: {error}"
        if self._failing != message:
            log.error(
                "%s; dropping the %d offsets after %d, which were never durable",
                message,
                lost,
                point.offset,
            )
        self._failing = message
        try:
            keep = bisect.bisect_right(self.segments, point.segment_base, key=base_offset)
            for segment in self.segments[keep:]:
                segment.delete()
            del self.segments[keep:]
            self.active.cut_back(point.size)
            self.txn_index.drop_from(point.offset)
            self._reload()
        except OSError as cut_error:
            self._go_offline(f"{message}, and cutting its unsynced tail failed: {cut_error}")
            return
        self.durable.fail_above(point.offset, storage_error(message))

    def _reload(self) -> None:
        """Rebuild every in-memory structure from the files (after cutting them)."""
        for segment in self.segments:
            segment.close()
        self.generation += 1
        self.producers = ProducerStateManager(self.directory)
        self.aborted = []
        self._ending = []
        self._open(crc_from_offset=None)

    def mark_flushed(self, offset: int) -> None:
        if self.durable.flushed(offset) and self.durable_on_append:
            self.notify()

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        """Resolves once every offset below ``offset`` is durable (acknowledgeable).

        Fails with KafkaError(KAFKA_STORAGE_ERROR) if the offsets are cut instead.
        """
        return self.durable.wait(offset, storage_error(self.offline) if self.offline else None)

    # -- waiting for new data -------------------------------------------------------------

    def new_data_waiter(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def discard_waiter(self, future: asyncio.Future[None]) -> None:
        if not future.done():
            future.cancel()
            self._waiters = [waiter for waiter in self._waiters if waiter is not future]

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def _segment_for(self, offset: int) -> LogSegment:
        index = bisect.bisect_right(self.segments, offset, key=base_offset) - 1
        return self.segments[max(index, 0)]

    def delete_records_before(self, offset: int) -> int:
        self.require_online()
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot delete records up to {offset}: high watermark is {self.high_watermark}",
            )
        if offset > self.log_start_offset:
            try:  # durable first: records a restart would bring back stay visible until then
                self._write_checkpoint(offset)
            except OSError as error:
                log.error("%s: cannot record the new log start offset: %s", self.name, error)
                raise KafkaError(
                    ErrorCode.kafka_storage_error, f"cannot delete records: {error}"
                ) from None
            self.log_start_offset = offset
            self._delete_segments_below(offset)
        return self.log_start_offset

    def _delete_segments_below(self, offset: int) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._delete_oldest_segment()

    def _delete_oldest_segment(self) -> None:
        segment = self.segments.pop(0)
        segment.delete()
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self._write_checkpoint()
        self.aborted = [txn for txn in self.aborted if txn.last_offset >= self.log_start_offset]
        self.producers.drop_before(self.log_start_offset)

    def enforce_retention(self) -> int:
        """Delete old segments per retention.ms / retention.bytes; return how many.

        An offline partition keeps every byte for the operator. A segment condemned by its
        timestamps alone is checked first (CRCs and headers): its timestamps are not
        CRC-checked below the recovery point, and a flipped one can make a segment look
        old; damage found takes the partition offline and deletes nothing.
        """
        if self.offline:
            return 0
        doomed = retention.expired_segments(
            self.segments, self.config, self.high_watermark, now_ms()
        )
        for count, by_time in enumerate(doomed):
            if by_time and not self._sound_before_deleting(self.segments[0]):
                return count
            self._delete_oldest_segment()
        return len(doomed)

    def _sound_before_deleting(self, segment: LogSegment) -> bool:
        limit = self.segments[1].base_offset if len(self.segments) > 1 else None
        scan = segment.scan(0, OffsetRules(gaps_allowed=segment.gaps_allowed, limit=limit))
        if scan.problem is None:
            return True
        self._go_offline(
            damage_reason(
                scan.reason or scan.problem,
                segment.log_path,
                scan.problem_at,
                "before deleting the segment by time (retention.ms)",
                "its timestamps cannot be trusted, so nothing was deleted, and acknowledged "
                "data is damaged; this partition serves nothing until repaired",
            ),
            damaged=True,
        )
        return False

    def close(self) -> None:
        if self.segments and not self.deleted and not self.offline:
            try:
                self.sync_now()
                self.producers.write_snapshot(self.log_end_offset)
            except (OSError, KafkaError) as error:
                log.error("%s: cannot make the log durable at shutdown: %s", self.name, error)
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        self.deleted = True
        for segment in self.segments:
            segment.delete()
        for path in self.directory.glob("*"):
            path.unlink(missing_ok=True)
        self.directory.rmdir()
        self.notify()
        self.durable.fail_above(
            -1, KafkaError(ErrorCode.unknown_topic_or_partition, f"{self.topic} was deleted")
        )
