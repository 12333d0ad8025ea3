"""exactly_once + db_offsets: offsets stored in the database transaction (offsets.py has
the steps and the table).

Each partition of a batch runs in its own database transaction: lock the partition's row
(``after_lock_batch``), drop the records below its offset, the work (``after_work``), store
the next offset (``after_store_offset``), check the partition is still owned, else roll
back (``before_db_commit``), commit (``after_db_commit``), then commit the offset to Kafka
asynchronously, which only speeds up the next start (``after_kafka_commit``). Partitions
start at max(database, Kafka) (``StartingOffsets``: ``after_lock_assignment``,
``after_seek``).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from confluent_kafka import Message

from onceflow.db import Database, DatabaseError
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore, PartitionRevoked
from onceflow.patterns.strategies.base import TP, RunnerParts, handle_in_transaction
from onceflow.patterns.transactional import batch_start_offsets

log = logging.getLogger("onceflow.patterns.runner")


class DbOffsets:
    rewinds_failed_batches = True

    def __init__(
        self, parts: RunnerParts, db: Database, offsets: OffsetStore, inbox: Inbox | None
    ) -> None:
        self.parts = parts
        self.db = db
        self.offset_store = offsets
        self.inbox = inbox  # inbox=True: event ids claimed too

    def process(self, messages: list[Message]) -> None:
        by_partition: dict[TP, list[Message]] = defaultdict(list)
        for message in messages:
            by_partition[(message.topic(), message.partition())].append(message)
        for tp, records in by_partition.items():
            self._process_partition(tp, records)

    def _process_partition(self, tp: TP, messages: list[Message]) -> None:
        parts = self.parts
        consumer, crash = parts.consumer, parts.crash
        if not consumer.owns(tp):
            return  # revoked: the new owner processes these records
        if consumer.is_paused(tp):  # records fetched before the pause: read them again later
            consumer.rewind_to({tp: messages[0].offset()})
            return
        try:
            with self.db.transaction() as tx:
                stored = self.offset_store.lock(tx, *tp)
                crash.reached("after_lock_batch")
                fresh = [m for m in messages if stored is None or m.offset() >= stored]
                parts.stats.stale_skipped += len(messages) - len(fresh)
                if not fresh:
                    return
                handle_in_transaction(parts.work, fresh, tx, self.inbox)
                crash.reached("after_work")
                self.offset_store.store(tx, *tp, fresh[-1].offset() + 1)
                crash.reached("after_store_offset")
                parts.output.flush_direct()
                if not consumer.owns(tp):
                    raise PartitionRevoked(f"{tp[0]}[{tp[1]}] revoked during the batch")
                crash.reached("before_db_commit")
            parts.stats.commits += 1
            crash.reached("after_db_commit")
        except PartitionRevoked as error:
            log.info("rolled back: %s", error)
            return
        except DatabaseError as error:
            consumer.back_off(batch_start_offsets(messages), error)
            return
        # Kafka's offset only speeds up the next start; the database's is the truth.
        consumer.commit({tp: messages[-1].offset() + 1}, synchronous=False)
        crash.reached("after_kafka_commit")

    def commit_pending(self) -> None:
        """Nothing waits: each batch's offsets commit with its database transaction."""

    def partitions_lost(self, partitions: list[TP]) -> None:
        """Nothing waits for a commit; a batch still running re-checks ownership."""
