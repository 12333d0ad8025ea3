"""A partition's durable log: segments, offsets, producer state and transaction markers.

``PartitionLog`` loads a partition and hands each request to the collaborator that owns
it: ``Appender`` (the one durable-append path), ``Durability`` (the fsync state machine),
``TransactionIndex`` (aborted transactions, the last stable offset), ``Retention`` and
``PartitionReads``, over one ``SegmentList`` and one ``PartitionStatus``. It keeps what
concerns the whole partition: loading and recovery, a failed fsync (which cuts the log
back and reloads it), closing and deleting.

Start-up recovery (:mod:`tail_recovery`) trusts what the recovery point says was durable
and cuts only an invalid tail after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from onceflow.config import TopicConfig
from onceflow.log.appender import Appender, AppendResult
from onceflow.log.batch import BatchHeader, KeyValue
from onceflow.log.durability import sync_directory
from onceflow.log.durable_offsets import DurableWaiters, NewDataWaiters, SyncPoint, SyncTarget
from onceflow.log.partition_durability import Durability
from onceflow.log.partition_reads import PartitionReads, ReadResult
from onceflow.log.partition_status import PartitionStatus, storage_error
from onceflow.log.producer_state import CompletedTxn, ProducerStateManager
from onceflow.log.recovery import QUARANTINE_DIR
from onceflow.log.retention import Retention
from onceflow.log.segment import LogSegment
from onceflow.log.segment_list import SegmentList
from onceflow.log.tail_recovery import (
    PartitionOffline,
    TailCut,
    read_known_gaps,
    rebuild_producer_state,
    recover_segments,
)
from onceflow.log.transaction_index import TransactionIndex
from onceflow.log.txn_index import AbortedTxn, TxnIndexFiles
from onceflow.protocol.errors import KafkaError

__all__ = ["AppendResult", "PartitionLog", "ReadResult"]

log = logging.getLogger(__name__)


class PartitionLog:
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
        # Offsets below it were durable when the broker last recorded it (None: unknown).
        self.recovery_point = recovery_point
        self.cuts: list[TailCut] = []  # what recovery cut from this log, with copies
        self._quarantine_root = quarantine_root or directory.parent / QUARANTINE_DIR
        self.new_data = NewDataWaiters()
        self.segment_list = SegmentList(directory, config)
        self.producers = ProducerStateManager(directory)
        waiters = DurableWaiters()
        self.status = PartitionStatus(topic, self.name, waiters, self.new_data)
        self.durability = Durability(
            self.segment_list, self.status, waiters, self.new_data, self.producers
        )
        self.transactions = TransactionIndex(
            TxnIndexFiles(directory), self.producers, self.durability
        )
        self.appender = Appender(
            self.segment_list,
            self.status,
            self.durability,
            self.producers,
            self.transactions,
            self.new_data,
            (lambda: on_append(self)) if on_append is not None else (lambda: None),
        )
        self.retention = Retention(
            self.segment_list, self.status, self.durability, self.transactions, self.producers
        )
        self.reads = PartitionReads(
            self.segment_list, self.status, self.durability, self.transactions
        )

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # -- state ----------------------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        return self.segment_list.segments

    @property
    def active(self) -> LogSegment:
        return self.segment_list.active

    @property
    def log_start_offset(self) -> int:
        return self.segment_list.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segment_list.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.durability.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.transactions.last_stable_offset

    @property
    def aborted(self) -> list[AbortedTxn]:
        return self.transactions.aborted

    @property
    def offline(self) -> str | None:
        return self.status.offline

    @property
    def deleted(self) -> bool:
        return self.status.deleted

    def require_online(self, reading: bool = False) -> None:
        self.status.require_online(reading)

    def size_bytes(self) -> int:
        return self.segment_list.size_bytes()

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
        segments = self.segment_list
        segments.open_files()
        try:
            headers = recover_segments(
                segments.segments,
                self.name,
                crc_from_offset,
                self.recovery_point,
                self._quarantine_root,
                self.transactions.files.drop_from,
                read_known_gaps(self.directory),
                self.cuts,
            )
        except PartitionOffline as offline:
            self.status.go_offline(offline.reason, damaged=offline.damaged)
            return
        checkpoint = segments.read_checkpoint()
        segments.log_start_offset = max(
            checkpoint.get("log_start_offset", 0), segments.segments[0].base_offset
        )
        indexed = self.transactions.files.drop_from(segments.log_end_offset)
        aborted = rebuild_producer_state(
            self.producers,
            headers,
            segments.log_end_offset,
            sorted(indexed, key=lambda txn: txn.last_offset),
            lambda header: segments.segment_for(header.base_offset).read(
                header.position, header.size
            ),
            self.appender.index_aborted,
        )
        self.transactions.loaded(aborted)
        if crc_from_offset is not None:  # loading, not reloading what is already synced
            self._sync_after_recovery_point()
        self.durability.loaded()

    def _sync_after_recovery_point(self) -> None:
        """What survived a crash in the page cache after the recovery point (the active
        segment, a rolled one not fsynced yet, a new segment's name) is durable now."""
        point = -1 if self.recovery_point is None else self.recovery_point
        unsynced = [segment for segment in self.segments if segment.next_offset > point]
        for segment in unsynced:
            segment.flush()
        if unsynced:
            sync_directory(self.directory)

    def _reload(self) -> None:
        """Rebuild every in-memory structure from the files (after cutting them)."""
        self.segment_list.close()
        self.durability.reloading()
        self.producers.clear()
        self.transactions.loaded([])
        self._open(crc_from_offset=None)

    def skip_to(self, offset: int) -> None:
        """Continue the log at ``offset``, never reusing the offsets before it (after a
        repair cut offsets that consumers may have read). The skip is recorded in
        ``partition.json`` before the new segment exists, so recovery accepts the gap."""
        end = self.log_end_offset
        if offset <= end:
            return
        gaps = sorted(read_known_gaps(self.directory) | {(end, offset)})
        self.segment_list.write_checkpoint(skipped=[list(gap) for gap in gaps])
        self.sync_now()
        self.segment_list.add_segment(offset)
        sync_directory(self.directory)
        self.durability.synced = SyncPoint(offset, offset, 0)
        self.durability.waiters.flushed_offset = offset

    # -- appending ------------------------------------------------------------------------

    def append_client_batch(
        self, data: bytes, header: BatchHeader, transactions_v2: bool = False
    ) -> AppendResult:
        return self.appender.append_client_batch(data, header, transactions_v2)

    def append_marker(
        self, producer_id: int, producer_epoch: int, control_type: int, coordinator_epoch: int
    ) -> CompletedTxn | None:
        return self.appender.append_marker(
            producer_id, producer_epoch, control_type, coordinator_epoch
        )

    def append_records(
        self, records: list[KeyValue], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        return self.appender.append_records(records, producer_id, producer_epoch)

    # -- reading --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, read_committed: bool) -> ReadResult:
        return self.reads.read(offset, max_bytes, read_committed)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        return self.reads.iter_batches(start_offset)

    # -- durability -----------------------------------------------------------------------

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        """Resolves once every offset below ``offset`` is durable (acknowledgeable).

        Fails with KafkaError(KAFKA_STORAGE_ERROR) if the offsets are cut instead.
        """
        return self.durability.wait(offset)

    def sync_now(self) -> None:
        """fsync on the calling thread; on failure drop the unsynced tail and raise."""
        target = self.durability.target()
        try:
            self.durability.sync(target)
        except OSError as error:
            self.sync_failed(target, error)
            raise storage_error(f"fsync of {self.name} failed: {error}") from None
        self.durability.synced_to(target)

    def sync_failed(self, target: SyncTarget, error: OSError) -> None:
        """An fsync failed: its pages may be gone, so drop everything not known durable.

        The log is cut back to the last successful fsync and reloaded from disk; the
        requests waiting for the cut offsets fail with KAFKA_STORAGE_ERROR.
        """
        failure = self.durability.failed(target, error)
        if failure is None:
            return
        point, message = failure
        try:
            self.segment_list.cut_back(point)
            self.transactions.files.drop_from(point.offset)
            self._reload()
        except OSError as cut_error:
            self.status.go_offline(f"{message}, and cutting its unsynced tail failed: {cut_error}")
            return
        self.durability.waiters.fail_above(point.offset, storage_error(message))

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        if self.segments and not self.deleted and not self.offline:
            try:
                self.sync_now()
                self.producers.write_snapshot(self.log_end_offset)
            except (OSError, KafkaError) as error:
                log.error("%s: cannot make the log durable at shutdown: %s", self.name, error)
        self.segment_list.close()

    def delete(self) -> None:
        self.status.deleted = True
        for segment in self.segments:
            segment.delete()
        for path in self.directory.glob("*"):
            path.unlink(missing_ok=True)
        self.directory.rmdir()
        self.new_data.notify()
        self.durability.waiters.fail_above(-1, self.status.deleted_error())
