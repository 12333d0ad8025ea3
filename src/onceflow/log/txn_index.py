"""A partition's transaction index: one ``<base>.txnindex`` file per segment listing the
aborted transactions that end in it (as Kafka's ``TransactionIndex``), so read_committed
fetches can name the aborted ranges without reading the records."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from onceflow.log.durability import append_durably, write_atomically

TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def pack(txn: AbortedTxn) -> bytes:
    return TXN_ENTRY.pack(
        0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )


def read_entries(path: Path) -> list[AbortedTxn]:
    data = path.read_bytes()
    usable = len(data) - len(data) % TXN_ENTRY.size  # a torn last entry is ignored
    entries = []
    for position in range(0, usable, TXN_ENTRY.size):
        _, producer_id, first, last, stable = TXN_ENTRY.unpack_from(data, position)
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


class TxnIndexFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def paths(self) -> list[Path]:
        return sorted(self.directory.glob("*.txnindex"))

    def drop_from(self, end_offset: int) -> list[AbortedTxn]:
        """Remove entries of transactions ending at or after ``end_offset`` (a cut) and a
        torn last entry; return the entries kept."""
        kept_everywhere = []
        for path in self.paths():
            entries = read_entries(path)
            kept = [entry for entry in entries if entry.last_offset < end_offset]
            if len(kept) != len(entries) or path.stat().st_size % TXN_ENTRY.size:
                write_atomically(path, b"".join(pack(entry) for entry in kept))
            kept_everywhere += kept
        return kept_everywhere

    def append(self, segment_base: int, txn: AbortedTxn) -> None:
        """Add ``txn`` to the index of the segment based at ``segment_base``, durably."""
        append_durably(self.directory / f"{segment_base:020d}.txnindex", pack(txn))
