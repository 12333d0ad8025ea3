"""Per-partition producer state: idempotent sequence checks and open transactions.

Follows Kafka's ProducerStateManager: for each producer id the partition remembers the
epoch, the metadata of the last five batches (to answer retried duplicates with their
original offsets), and the first offset of its open transaction (which bounds the last
stable offset). State is snapshotted to ``<offset:020d>.snapshot`` files and rebuilt on
startup by replaying batch headers written after the latest snapshot.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.log.batch import NO_SEQUENCE, BatchHeader
from onceflow.log.durability import write_atomically
from onceflow.protocol.errors import ErrorCode, KafkaError

BATCHES_TO_REMEMBER = 5
NO_EPOCH = -1
INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_REMEMBER))
    txn_first_offset: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None


@dataclass(slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    aborted: bool


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of open transaction

    # -- validation before append -----------------------------------------------------

    def check(self, header: BatchHeader, transactions_v2: bool = False) -> BatchMetadata | None:
        """Validate a client batch; return the original metadata if it is a duplicate.

        ``transactions_v2``: a transactional batch of Produce v12+ (KIP-890), which must
        start at sequence 0 when the partition has no state for its producer."""
        entry = self.producers.get(header.producer_id)
        if transactions_v2 and header.base_sequence != 0 and (entry is None or not entry.batches):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"invalid sequence {header.base_sequence} from producer {header.producer_id}: "
                "a transactions v2 producer with no state on the partition starts at 0",
            )
        if entry is None:
            return None  # an unknown producer may start at any sequence, as in Kafka
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        if header.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"epoch {header.producer_epoch} is older than current epoch {entry.epoch} "
                f"of producer {header.producer_id}",
            )
        if header.base_sequence == NO_SEQUENCE:
            return None
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0 and entry.epoch != NO_EPOCH:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"invalid sequence {header.base_sequence} for new epoch "
                    f"{header.producer_epoch}: expected 0",
                )
        elif entry.epoch != NO_EPOCH and not in_sequence(entry.last_seq, header.base_sequence):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence {header.base_sequence} from producer "
                f"{header.producer_id} (last sequence {entry.last_seq})",
            )
        if not header.is_transactional and header.producer_id in self.ongoing:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                "non-transactional batch from a producer with an open transaction",
            )
        return None

    # -- updates after append -----------------------------------------------------------

    def on_append(self, header: BatchHeader) -> None:
        """Record an appended data batch (header carries its assigned base offset)."""
        if not header.has_producer_id:
            return
        entry = self._entry_at_epoch(header)
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
            )
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and header.producer_id not in self.ongoing:
            self.ongoing[header.producer_id] = header.base_offset
            entry.txn_first_offset = header.base_offset

    def check_marker(self, producer_id: int, epoch: int) -> None:
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"marker epoch {epoch} is older than producer epoch {entry.epoch}",
            )

    def check_end_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's checks of a COMMIT/ABORT marker: neither the producer's epoch nor the
        coordinator's may be older than the last this partition saw."""
        self.check_marker(producer_id, epoch)
        entry = self.producers.get(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker coordinator epoch {coordinator_epoch} is older than coordinator epoch "
                f"{entry.coordinator_epoch} of producer {producer_id}",
            )

    def on_marker(
        self, header: BatchHeader, aborted: bool, coordinator_epoch: int
    ) -> CompletedTxn | None:
        """Record a commit/abort marker; return the transaction it completed, if any."""
        entry = self._entry_at_epoch(header)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        first_offset = self.ongoing.pop(header.producer_id, None)
        entry.txn_first_offset = -1
        if first_offset is None:
            return None
        return CompletedTxn(header.producer_id, first_offset, header.base_offset, aborted)

    def replay(
        self, header: BatchHeader, control_type: int | None, coordinator_epoch: int = -1
    ) -> CompletedTxn | None:
        if header.is_control:
            return self.on_marker(header, control_type == 0, coordinator_epoch)
        self.on_append(header)
        return None

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def open_transaction(self, producer_id: int) -> int | None:
        return self.ongoing.get(producer_id)

    def _entry_at_epoch(self, header: BatchHeader) -> ProducerEntry:
        """The producer's entry, its batches forgotten when the batch opens a new epoch."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        return entry

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def drop_before(self, log_start_offset: int) -> None:
        """Drop producers whose every remembered batch precedes the log start offset."""
        for producer_id, entry in list(self.producers.items()):
            if producer_id in self.ongoing:
                continue
            if entry.batches and entry.batches[-1].last_offset < log_start_offset:
                del self.producers[producer_id]

    # -- snapshots ----------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / snapshot_name(offset)

    def write_snapshot(self, offset: int) -> None:
        write_atomically(self.snapshot_path(offset), self.snapshot(offset))
        self.prune_snapshots()

    def snapshot(self, offset: int) -> bytes:
        """The state now, as the content of the snapshot at ``offset``."""
        state = {
            "offset": offset,
            "producers": [
                {
                    "producer_id": e.producer_id,
                    "epoch": e.epoch,
                    "coordinator_epoch": e.coordinator_epoch,
                    "txn_first_offset": self.ongoing.get(e.producer_id, -1),
                    "last_timestamp": e.last_timestamp,
                    "batches": [
                        [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                        for b in e.batches
                    ],
                }
                for e in self.producers.values()
            ],
        }
        return json.dumps(state).encode()

    def prune_snapshots(self) -> None:
        """Keep the newest two snapshots."""
        for old in self.snapshot_offsets()[:-2]:
            self.snapshot_path(old).unlink(missing_ok=True)

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob("*.snapshot"):
            try:
                offsets.append(int(path.stem))
            except ValueError:
                continue
        return sorted(offsets)

    def load_latest_snapshot(self, max_offset: int) -> int:
        """Load the newest readable snapshot at or below ``max_offset``; return its offset."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            try:
                state = json.loads(self.snapshot_path(offset).read_text())
            except (OSError, ValueError):
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            self.clear()
            for item in state["producers"]:
                entry = ProducerEntry(
                    item["producer_id"],
                    epoch=item["epoch"],
                    coordinator_epoch=item["coordinator_epoch"],
                    last_timestamp=item["last_timestamp"],
                )
                for batch in item["batches"]:
                    entry.batches.append(BatchMetadata(*batch))
                if item["txn_first_offset"] >= 0:
                    self.ongoing[entry.producer_id] = item["txn_first_offset"]
                    entry.txn_first_offset = item["txn_first_offset"]
                self.producers[entry.producer_id] = entry
            return offset
        self.clear()
        return -1

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
