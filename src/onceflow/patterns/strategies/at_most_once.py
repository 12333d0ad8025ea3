"""at_most_once: the batch's offsets commit before it is processed.

Steps: consume (``after_consume``); commit the offsets, synchronously
(``after_kafka_commit``); the work, in the database transaction when there is a database
(``after_begin``, ``before_db_commit``, ``after_db_commit``) and the outputs flushed
(``after_produce``). A crash after the commit loses the batch; nothing is processed twice,
and a failed batch is not read again.
"""

from __future__ import annotations

from confluent_kafka import Message

from onceflow.db import Database, DatabaseError
from onceflow.patterns.strategies.base import TP, RunnerParts, process_in_database
from onceflow.patterns.transactional import batch_start_offsets, next_offsets


class AtMostOnce:
    rewinds_failed_batches = False
    offset_store = None

    def __init__(self, parts: RunnerParts, db: Database | None) -> None:
        self.parts = parts
        self.db = db

    def process(self, messages: list[Message]) -> None:
        parts = self.parts
        if not parts.consumer.commit(next_offsets(messages), synchronous=True):
            parts.consumer.rewind(messages)  # not committed: do not process (retry later)
            return
        parts.stats.commits += 1
        parts.crash.reached("after_kafka_commit")
        try:
            if self.db is not None:
                process_in_database(parts, self.db, messages)
            else:
                parts.work.handle(messages, None)
                parts.output.flush_direct()
                parts.crash.reached("after_produce")
        except DatabaseError as error:
            parts.consumer.back_off(batch_start_offsets(messages), error)

    def commit_pending(self) -> None:
        """Nothing waits: every batch committed before it ran."""

    def partitions_lost(self, partitions: list[TP]) -> None:
        """Nothing waits for a commit."""
