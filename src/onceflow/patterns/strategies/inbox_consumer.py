"""exactly_once + inbox: the idempotent consumer (inbox.py has the steps and the table).

At-least-once delivery made exactly-once in effect: each batch runs in one database
transaction that first claims the records' event ids (``INSERT ... ON CONFLICT DO
NOTHING``) and skips the records whose id was already there. Steps: consume
(``after_consume``), begin (``after_begin``), claim the ids, the work (outbox rows with
``outbox=True``; a direct produce is flushed) (``before_db_commit``), commit
(``after_db_commit``, ``after_produce``), then the Kafka offsets, for the batches of
``commit_interval_ms`` together (``after_kafka_commit``). A redelivered batch is skipped
by the claim.
"""

from __future__ import annotations

from confluent_kafka import Message

from onceflow.db import Database
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.strategies.base import (
    TP,
    OffsetsAfterwards,
    RunnerParts,
    process_or_back_off,
)


class InboxConsumer:
    rewinds_failed_batches = True
    offset_store = None

    def __init__(self, parts: RunnerParts, db: Database, inbox: Inbox) -> None:
        self.parts = parts
        self.db = db
        self.inbox = inbox
        self.commits = OffsetsAfterwards(parts, flush_first=False)

    def process(self, messages: list[Message]) -> None:
        if process_or_back_off(self.parts, self.db, messages, self.inbox):
            self.commits.add(messages)

    def commit_pending(self) -> None:
        self.commits.commit_pending()

    def partitions_lost(self, partitions: list[TP]) -> None:
        self.commits.drop(partitions)
