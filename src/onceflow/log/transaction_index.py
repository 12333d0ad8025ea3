"""A partition's aborted transactions and its last stable offset.

The aborted transactions are kept in memory, sorted by their marker's offset, and in the
transaction index files (``txn_index.py``), so that a read_committed fetch can name those
overlapping its range without reading records. The last stable offset is the first offset
of the oldest transaction still open, bounded by the high watermark. A transaction whose
marker the high watermark has not passed yet still counts as open, as in Kafka, so that a
read_committed reader gets its records and its marker together.
"""

from __future__ import annotations

import bisect

from onceflow.log.partition_durability import Durability
from onceflow.log.producer_state import ProducerStateManager
from onceflow.log.txn_index import AbortedTxn, TxnIndexFiles


class TransactionIndex:
    def __init__(
        self, files: TxnIndexFiles, producers: ProducerStateManager, durability: Durability
    ) -> None:
        self.files = files
        self.aborted: list[AbortedTxn] = []  # sorted by last_offset
        self._producers = producers
        self._durability = durability
        # Transactions ended by a marker the high watermark has not passed yet, as
        # (first offset, marker offset).
        self._ending: list[tuple[int, int]] = []

    @property
    def last_stable_offset(self) -> int:
        high_watermark = self._durability.high_watermark
        if self._ending:
            self._ending = [ending for ending in self._ending if ending[1] >= high_watermark]
        firsts = [first for first, _ in self._ending]
        unstable = self._producers.first_unstable_offset()
        if unstable is not None:
            firsts.append(unstable)
        return min([high_watermark, *firsts])

    def stable_after(self, producer_id: int, marker_offset: int) -> int:
        """The last stable offset once ``producer_id``'s transaction is ended by a marker."""
        others = [first for pid, first in self._producers.ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping the offsets [start, end)."""
        keys = [txn.last_offset for txn in self.aborted]
        first = bisect.bisect_left(keys, start)
        return [txn for txn in self.aborted[first:] if txn.first_offset < end]

    def ended(self, first_offset: int, marker_offset: int, aborted: AbortedTxn | None) -> None:
        """A marker at ``marker_offset`` ended a transaction (``aborted``: its index entry,
        already durable, if it was aborted)."""
        self._ending.append((first_offset, marker_offset))
        if aborted is not None:
            self.aborted.append(aborted)

    def loaded(self, aborted: list[AbortedTxn]) -> None:
        """The log was (re)loaded: these are its aborted transactions, nothing is ending."""
        self.aborted = aborted
        self._ending = []

    def drop_before(self, log_start_offset: int) -> None:
        self.aborted = [txn for txn in self.aborted if txn.last_offset >= log_start_offset]
