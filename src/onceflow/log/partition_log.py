"""A partition's durable log: segments, offsets, producer state and transaction markers."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import json
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onceflow.config import TopicConfig
from onceflow.coordinator.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
)
from onceflow.log.batch import (
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    BatchHeader,
    Bytes,
    KeyValue,
    assign_offset,
    build_batch,
    build_control_batch,
    control_type_of,
    offset_prefix,
    parse_header,
    set_log_append_time,
)
from onceflow.log.segment import LogSegment
from onceflow.protocol.errors import ErrorCode, KafkaError

TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    duplicate: bool = False


@dataclass(slots=True)
class ReadResult:
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


class PartitionLog:
    def __init__(self, directory: Path, topic: str, partition: int, config: TopicConfig) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self._segment_bases: list[int] = []
        self.log_start_offset = 0
        self.flushed_offset = 0
        self.producers = ProducerStateManager(directory)
        self.aborted: list[AbortedTxn] = []  # sorted by last_offset
        self._waiters: list[asyncio.Future[None]] = []
        self._durable_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.deleted = False

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
        return self.flushed_offset if self.durable_on_append else self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        unstable = self.producers.first_unstable_offset()
        high_watermark = self.high_watermark
        return high_watermark if unstable is None else min(unstable, high_watermark)

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    # -- loading --------------------------------------------------------------------------

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*.cleaned"):  # a compaction cut short
            leftover.unlink()
        bases = sorted(int(path.stem) for path in self.directory.glob("*.log"))
        checkpoint = self._read_checkpoint()
        if not bases:
            bases = [checkpoint.get("log_start_offset", 0)]
        interval = self.config["index.interval.bytes"]
        all_headers: list[BatchHeader] = []
        for number, base in enumerate(bases):
            segment = LogSegment(self.directory, base, interval)
            is_last = number == len(bases) - 1
            all_headers.extend(segment.load(validate=is_last))
            self.segments.append(segment)
        self._segment_bases = [segment.base_offset for segment in self.segments]
        self.log_start_offset = max(
            checkpoint.get("log_start_offset", 0), self.segments[0].base_offset
        )
        self.aborted = sorted(self._load_txn_indexes(), key=lambda txn: txn.last_offset)
        self._rebuild_producer_state(all_headers)
        self.active.flush()
        self.flushed_offset = self.log_end_offset

    def _rebuild_producer_state(self, headers: list[BatchHeader]) -> None:
        snapshot_offset = self.producers.load_latest_snapshot(self.log_end_offset)
        replay_from = max(snapshot_offset, 0)
        known = {(txn.producer_id, txn.last_offset) for txn in self.aborted}
        self.aborted = [txn for txn in self.aborted if txn.last_offset < replay_from]
        for header in headers:
            if header.base_offset < replay_from:
                continue
            control_type = None
            if header.is_control:
                segment = self._segment_for(header.base_offset)
                data = segment.read(header.position, header.size)
                header_copy = parse_header(data)
                control_type = control_type_of(data, header_copy)
            completed = self.producers.replay(header, control_type)
            if completed is not None and completed.aborted:
                entry = AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    self.producers.first_unstable_offset() or completed.last_offset + 1,
                )
                self.aborted.append(entry)
                if (entry.producer_id, entry.last_offset) not in known:
                    self._write_txn_entry(entry)
        self.aborted.sort(key=lambda txn: txn.last_offset)

    def _checkpoint_path(self) -> Path:
        return self.directory / "partition.json"

    def _read_checkpoint(self) -> dict:
        try:
            return json.loads(self._checkpoint_path().read_text())
        except (OSError, ValueError):
            return {}

    def _write_checkpoint(self) -> None:
        path = self._checkpoint_path()
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"log_start_offset": self.log_start_offset}))
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    def _load_txn_indexes(self) -> list[AbortedTxn]:
        entries = []
        for path in sorted(self.directory.glob("*.txnindex")):
            data = path.read_bytes()
            usable = len(data) - len(data) % TXN_ENTRY.size
            for position in range(0, usable, TXN_ENTRY.size):
                _, producer_id, first, last, stable = TXN_ENTRY.unpack_from(data, position)
                if last < self.log_end_offset:
                    entries.append(AbortedTxn(producer_id, first, last, stable))
        return entries

    def _write_txn_entry(self, txn: AbortedTxn) -> None:
        segment = self._segment_for(txn.last_offset)
        path = self.directory / f"{segment.base_offset:020d}.txnindex"
        with open(path, "ab") as handle:
            handle.write(
                TXN_ENTRY.pack(
                    0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                )
            )

    # -- appending ------------------------------------------------------------------------

    def append_client_batch(self, data: bytes, header: BatchHeader) -> AppendResult:
        """Append one validated producer batch; duplicates return their original offsets."""
        if header.has_producer_id:
            duplicate = self.producers.check(header)
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
        """Write a COMMIT or ABORT control batch ending the producer's transaction."""
        self.producers.check_marker(producer_id, producer_epoch)
        offset = self.log_end_offset
        data = build_control_batch(
            offset, producer_id, producer_epoch, control_type, coordinator_epoch, now_ms()
        )
        header = parse_header(data)
        self._append((data,), header)
        completed = self.producers.on_marker(
            header, control_type == CONTROL_ABORT, coordinator_epoch
        )
        if completed is not None and completed.aborted:
            entry = AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                self.producers.first_unstable_offset() or offset + 1,
            )
            self.aborted.append(entry)
            self._write_txn_entry(entry)
        self.notify()
        return completed

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
        offset = self.log_start_offset if start_offset is None else start_offset
        for segment in self.segments:
            if segment.next_offset <= offset:
                continue
            for header in segment.headers_from(offset):
                data = segment.read(header.position, header.size)
                header = parse_header(data)
                yield header, data

    def _append(self, parts: Sequence[Bytes], header: BatchHeader) -> None:
        """Append one batch given as consecutive byte strings (written with one writev)."""
        if self.deleted:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{self.topic} was deleted")
        self._maybe_roll(header)
        self.active.append_parts(parts, header)
        if not self.durable_on_append:
            self.notify()

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
        old.flush()
        base = old.next_offset
        self.producers.write_snapshot(base)
        self.segments.append(LogSegment(self.directory, base, self.config["index.interval.bytes"]))
        self._segment_bases.append(base)

    # -- durability -----------------------------------------------------------------------

    def flush(self) -> int:
        """fsync the active segment; return the offset now durable. Safe off the loop."""
        target = self.log_end_offset
        self.active.flush()
        return target

    def mark_flushed(self, offset: int) -> None:
        if offset <= self.flushed_offset:
            return
        self.flushed_offset = offset
        still_waiting = []
        for target, future in self._durable_waiters:
            if target <= offset:
                if not future.done():
                    future.set_result(None)
            else:
                still_waiting.append((target, future))
        self._durable_waiters = still_waiting
        if self.durable_on_append:
            self.notify()

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if offset <= self.flushed_offset:
            future.set_result(None)
        else:
            self._durable_waiters.append((offset, future))
        return future

    @property
    def dirty(self) -> bool:
        return self.flushed_offset < self.log_end_offset

    # -- reading --------------------------------------------------------------------------

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
        index = bisect.bisect_right(self._segment_bases, offset) - 1
        return self.segments[max(index, 0)]

    def read(self, offset: int, max_bytes: int, read_committed: bool) -> ReadResult:
        high_watermark = self.high_watermark
        stable = self.last_stable_offset
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]",
            )
        upper = stable if read_committed else high_watermark
        records = b""
        end_offset = offset
        if offset < upper:
            records, end_offset = self._read_range(offset, upper, max_bytes)
        aborted = None
        if read_committed:
            aborted = self.aborted_between(offset, end_offset) if records else []
        return ReadResult(records, high_watermark, stable, self.log_start_offset, aborted)

    def _read_range(self, offset: int, upper: int, max_bytes: int) -> tuple[bytes, int]:
        index = max(bisect.bisect_right(self._segment_bases, offset) - 1, 0)
        for segment in self.segments[index:]:
            start = end = -1
            end_offset = offset
            for header in segment.headers_from(offset):
                if header.base_offset >= upper:
                    break
                if start < 0:
                    start = header.position
                elif header.position + header.size - start > max_bytes:
                    break
                end = header.position + header.size
                end_offset = header.next_offset
            if start >= 0:
                return segment.read(start, end - start), end_offset
            if segment.next_offset > offset:
                break
        return b"", offset

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping the offsets [start, end)."""
        keys = [txn.last_offset for txn in self.aborted]
        first = bisect.bisect_left(keys, start)
        return [txn for txn in self.aborted[first:] if txn.first_offset < end]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """First batch whose max timestamp is >= ``timestamp``: (offset, timestamp)."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            for header in segment.headers_for_timestamp(timestamp):
                if header.max_timestamp >= timestamp and header.next_offset > self.log_start_offset:
                    return max(header.base_offset, self.log_start_offset), header.max_timestamp
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int]:
        best = (-1, -1)
        for segment in self.segments:
            if segment.max_timestamp > best[1]:
                for header in segment.headers_from(segment.base_offset):
                    if header.max_timestamp > best[1]:
                        best = (header.last_offset, header.max_timestamp)
        return best

    # -- retention and deletion -----------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot delete records up to {offset}: high watermark is {self.high_watermark}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._write_checkpoint()
            self._delete_segments_below(offset)
        return self.log_start_offset

    def _delete_segments_below(self, offset: int) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._delete_oldest_segment()

    def _delete_oldest_segment(self) -> None:
        segment = self.segments.pop(0)
        self._segment_bases.pop(0)
        segment.delete()
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self._write_checkpoint()
        self.aborted = [txn for txn in self.aborted if txn.last_offset >= self.log_start_offset]
        self.producers.drop_before(self.log_start_offset)

    def enforce_retention(self) -> int:
        """Delete old segments per retention.ms / retention.bytes; return how many."""
        if "delete" not in str(self.config["cleanup.policy"]).split(","):
            return 0
        deleted = 0
        retention_ms = self.config["retention.ms"]
        retention_bytes = self.config["retention.bytes"]
        now = now_ms()
        while len(self.segments) > 1:
            oldest = self.segments[0]
            if oldest.next_offset > self.high_watermark:
                break
            expired = (
                retention_ms >= 0
                and oldest.max_timestamp >= 0
                and (now - oldest.max_timestamp > retention_ms)
            )
            oversized = retention_bytes >= 0 and self.size_bytes() - oldest.size >= retention_bytes
            if not (expired or oversized):
                break
            self._delete_oldest_segment()
            deleted += 1
        return deleted

    def close(self) -> None:
        if self.segments and not self.deleted:
            self.active.flush()
            self.producers.write_snapshot(self.log_end_offset)
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
        for _, future in self._durable_waiters:
            if not future.done():
                future.set_result(None)
