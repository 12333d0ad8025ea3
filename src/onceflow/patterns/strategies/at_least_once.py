"""at_least_once: the batch's offsets commit after it is processed.

Steps: consume (``after_consume``); the work, in the database transaction when there is a
database (``after_begin``, ``before_db_commit``, ``after_db_commit``, ``after_produce``);
then, for the batches of ``commit_interval_ms`` together, the outputs flushed (without a
database: ``after_produce``) and the offsets committed (``after_kafka_commit``). A crash
before the commit processes the batch again: duplicates, nothing lost.
"""

from __future__ import annotations

from confluent_kafka import Message

from onceflow.db import Database
from onceflow.patterns.strategies.base import (
    TP,
    OffsetsAfterwards,
    RunnerParts,
    process_or_back_off,
)


class AtLeastOnce:
    rewinds_failed_batches = True
    offset_store = None

    def __init__(self, parts: RunnerParts, db: Database | None) -> None:
        self.parts = parts
        self.db = db
        self.commits = OffsetsAfterwards(parts, flush_first=db is None)

    def process(self, messages: list[Message]) -> None:
        if process_or_back_off(self.parts, self.db, messages):
            self.commits.add(messages)

    def commit_pending(self) -> None:
        self.commits.commit_pending()

    def partitions_lost(self, partitions: list[TP]) -> None:
        self.commits.drop(partitions)
