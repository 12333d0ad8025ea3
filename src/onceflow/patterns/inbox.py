"""Idempotent consumer (the inbox): event ids recorded in the same transaction as the work.

Steps (the deduplication article's flow; crash points between them):

1. consume the event;
2. begin the database transaction;
3. insert the event id (``INSERT ... ON CONFLICT DO NOTHING``): 0 rows means the event
   was processed before, so it is skipped;
4. do the work (entity writes, outbox rows);
5. commit the database transaction;
6. commit the consumer offset to Kafka (after: a crash before it only causes a
   redelivery, which step 3 removes).

Retention: ids are kept at least as long as a duplicate can arrive (the input topic's
retention, or the longest replay you allow); ``cleanup(older_than_ms)`` deletes older ids in
small batches so it never holds long locks.
"""

from __future__ import annotations

import logging

from onceflow.db import Transaction
from onceflow.patterns.group_table import GroupTable

DEFAULT_TABLE = "onceflow_inbox"
STEPS = ("after_begin", "after_insert_event_id", "after_work", "before_db_commit",
         "after_db_commit", "after_kafka_commit")  # fmt: skip

log = logging.getLogger(__name__)


class Inbox(GroupTable):
    """Processed event ids per consumer group."""

    default_table = DEFAULT_TABLE

    def schema(self) -> list[str]:
        return [
            self.create_table(
                "event_id TEXT NOT NULL",
                f"received_at_ms BIGINT NOT NULL DEFAULT ({self.db.dialect.now_ms})",
                "PRIMARY KEY (consumer_group, event_id)",
            ),
            f"CREATE INDEX IF NOT EXISTS {self.table}_received ON {self.table} (received_at_ms)",
        ]

    def claim(self, tx: Transaction, event_id: str) -> bool:
        """Record ``event_id`` in this transaction; False when it was already processed."""
        cursor = tx.execute(
            f"INSERT INTO {self.table} (consumer_group, event_id) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING",
            (self.group, event_id),
        )
        return cursor.rowcount == 1

    def claim_many(self, tx: Transaction, event_ids: list[str]) -> set[str]:
        """Record a batch of ids in one statement per chunk; returns the ids that are new.

        Uses ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` (PostgreSQL, SQLite >= 3.35).
        An id repeated inside the batch is returned once: the caller processes its first
        occurrence only.
        """
        new: set[str] = set()
        unique = list(dict.fromkeys(event_ids))
        for start in range(0, len(unique), 400):
            chunk = unique[start : start + 400]
            rows = tx.fetchall(
                f"INSERT INTO {self.table} (consumer_group, event_id) VALUES "
                + ", ".join("(?, ?)" for _ in chunk)
                + " ON CONFLICT DO NOTHING RETURNING event_id",
                [value for event_id in chunk for value in (self.group, event_id)],
            )
            new.update(row[0] for row in rows)
        return new

    def seen(self, event_id: str) -> bool:
        row = self.db.execute(
            f"SELECT 1 FROM {self.table} WHERE consumer_group = ? AND event_id = ?",
            (self.group, event_id),
        ).fetchone()
        return row is not None

    def cleanup(self, older_than_ms: int, batch: int = 5_000) -> int:
        """Delete ids received more than ``older_than_ms`` ago; returns how many.

        Only safe when no duplicate of those events can still be delivered: keep the
        retention above the input topic's ``retention.ms`` (or your replay window).
        """
        deleted = 0
        while True:
            with self.db.transaction() as tx:
                cursor = tx.execute(
                    f"DELETE FROM {self.table} WHERE consumer_group = ? AND event_id IN ("
                    f" SELECT event_id FROM {self.table} WHERE consumer_group = ?"
                    f" AND received_at_ms < {self.db.dialect.now_ms} - ? LIMIT ?)",
                    (self.group, self.group, older_than_ms, batch),
                )
                count = max(cursor.rowcount, 0)
            deleted += count
            if count < batch:
                break
        if deleted:
            log.info(
                "inbox %s: deleted %d ids older than %d ms", self.table, deleted, older_than_ms
            )
        return deleted
