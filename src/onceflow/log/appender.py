"""The one durable-append path of a partition.

Every batch, whether a producer's (``append_client_batch``), a control marker
(``append_marker``) or a coordinator's record (``append_records``), is written by
``Appender._write``: one writev of one batch, or no trace of it. A write that fails (full
disk, EIO) is cut back and answers KAFKA_STORAGE_ERROR; a cut that itself fails takes the
partition offline. The partition is then asked to become durable (``on_append``: the
group commit); an fsync that fails is the partition's ``sync_failed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onceflow.clock import now_ms
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
from onceflow.log.durable_offsets import NewDataWaiters
from onceflow.log.partition_durability import Durability
from onceflow.log.partition_status import PartitionStatus, storage_error
from onceflow.log.producer_state import CompletedTxn, ProducerStateManager
from onceflow.log.segment import CutBackFailed
from onceflow.log.segment_list import SegmentList
from onceflow.log.transaction_index import TransactionIndex
from onceflow.log.txn_index import AbortedTxn
from onceflow.protocol.errors import KafkaError


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    duplicate: bool = False


@dataclass(slots=True, eq=False)
class Appender:
    segments: SegmentList
    status: PartitionStatus
    durability: Durability
    producers: ProducerStateManager
    transactions: TransactionIndex
    new_data: NewDataWaiters
    on_append: Callable[[], None]  # asks for an fsync (the group commit)

    def append_client_batch(
        self, data: bytes, header: BatchHeader, transactions_v2: bool = False
    ) -> AppendResult:
        """Append one validated producer batch; duplicates return their original offsets.
        ``transactions_v2``: a transactional batch of Produce v12+ (KIP-890)."""
        if header.has_producer_id:
            duplicate = self.producers.check(header, transactions_v2)
            if duplicate is not None:
                return AppendResult(
                    duplicate.first_offset, duplicate.last_offset, -1, duplicate=True
                )
        base_offset = self.segments.log_end_offset
        log_append_time = -1
        if self.segments.config["message.timestamp.type"] == "LogAppendTime":
            patched = assign_offset(data, base_offset)
            log_append_time = now_ms()
            set_log_append_time(patched, log_append_time)
            stored = parse_header(patched)
            self._write((patched,), stored)
        else:
            # The records are written from the request's buffer: only the prefix changes.
            prefix = offset_prefix(data, base_offset)
            stored = dataclasses.replace(header, base_offset=base_offset, leader_epoch=0)
            self._write((prefix, memoryview(data)[len(prefix) :]), stored)
        self.producers.on_append(stored)
        return AppendResult(base_offset, stored.last_offset, log_append_time)

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
        self.status.require_online()
        self.producers.check_end_marker(producer_id, producer_epoch, coordinator_epoch)
        offset = self.segments.log_end_offset
        data = build_control_batch(
            offset, producer_id, producer_epoch, control_type, coordinator_epoch, now_ms()
        )
        header = parse_header(data)
        aborted = None
        if control_type == CONTROL_ABORT:
            first = self.producers.open_transaction(producer_id)
            if first is not None:
                stable = self.transactions.stable_after(producer_id, offset)
                aborted = AbortedTxn(producer_id, first, offset, stable)
                try:
                    self.index_aborted(aborted)
                except OSError as error:
                    raise self.status.write_failed(error) from None
        try:
            self._write((data,), header)
        except KafkaError:
            if aborted is not None:
                self.transactions.files.drop_from(offset)
            raise
        completed = self.producers.on_marker(
            header, control_type == CONTROL_ABORT, coordinator_epoch
        )
        if completed is not None:  # (an abort indexed above always completes one)
            self.transactions.ended(completed.first_offset, completed.last_offset, aborted)
        self.new_data.notify()
        return completed

    def index_aborted(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction to the index of the segment its marker is in."""
        segment = self.segments.segment_for(txn.last_offset)
        self.transactions.files.append(segment.base_offset, txn)

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
        base_offset = self.segments.log_end_offset
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
        self._write((data,), header)
        self.producers.on_append(header)
        return base_offset

    def _write(self, parts: Sequence[Bytes], header: BatchHeader) -> None:
        """The one append path: write one batch (one writev) or leave no trace of it.

        Raises KafkaError(KAFKA_STORAGE_ERROR) when the write fails; the segment is then
        as it was before. Asks for an fsync of what was written (``on_append``).
        """
        status = self.status
        status.require_writable()
        try:
            if self._roll_due(header):
                self._roll()
            self.segments.active.append_parts(parts, header)
        except CutBackFailed as error:
            status.go_offline(f"a failed write could not be removed: {error}")
            raise storage_error(status.offline or str(error)) from None
        except OSError as error:
            raise status.write_failed(error) from None
        status.write_succeeded()
        self.durability.appended()
        self.on_append()

    def _roll(self) -> None:
        """Start the next segment. Nothing is fsynced here, on the event loop: the closed
        segment, the new one's name and the producer-state snapshot taken now are made
        durable by the partition's next fsync (``Durability``), which the append asks for."""
        snapshot = self.producers.snapshot(self.segments.log_end_offset)
        self.segments.add_segment(self.segments.log_end_offset, name_durable=False)
        self.durability.rolled(snapshot)

    def _roll_due(self, header: BatchHeader) -> bool:
        active = self.segments.active
        if active.size == 0:
            return False
        config = self.segments.config
        too_big = active.size + header.size > config["segment.bytes"]
        # Like Kafka: the new batch's timestamp against the segment's first one, so that
        # historical (old CreateTime) data does not roll a segment per batch.
        too_old = (
            active.created_ms is not None
            and header.max_timestamp - active.created_ms > config["segment.ms"]
        )
        return too_big or too_old
