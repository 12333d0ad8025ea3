"""Offsets stored in the database transaction (the Karafka "transactional offsets" pattern).

Table ``onceflow_offsets(consumer_group, topic, partition, next_offset)``: one row per
topic-partition, holding the offset of the next record to process. The work a batch does
and the new ``next_offset`` commit in one database transaction, so after any crash the
database says exactly which records have had their effects.

Steps (``STEPS``; crash points are reached between them):

1. on assignment, lock the partition row and read the database offset
   (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite: a process that
   takes the partition over blocks here until the previous owner's transaction ends);
2. read Kafka's committed offset; start at ``max(database, Kafka)`` and seek there when they
   differ (the database is ahead whenever a Kafka commit was lost);
3. for each batch: begin, lock the row, skip records below the database offset;
4. do the work;
5. write ``next_offset``;
6. check the partition is still ours, else roll back (``PartitionRevoked``);
7. commit the database transaction;
8. commit the offset to Kafka too (best effort: only speeds up the next start).

Kafka's committed offset can only lag the database's (step 8 follows step 7), which is why
``max`` is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from onceflow.db import DatabaseError, Transaction
from onceflow.patterns.group_table import GroupTable

DEFAULT_TABLE = "onceflow_offsets"
UNKNOWN = -1

STEPS = (
    "after_lock_assignment",
    "after_seek",
    "after_lock_batch",
    "after_work",
    "after_store_offset",
    "before_db_commit",
    "after_db_commit",
    "after_kafka_commit",
)


class PartitionRevoked(RuntimeError):
    """The partition was revoked while the batch ran; its transaction was rolled back."""


@dataclass(frozen=True, slots=True)
class StartOffset:
    topic: str
    partition: int
    database: int | None
    kafka: int | None

    @property
    def offset(self) -> int | None:
        """max(database, Kafka); None when neither knows (use auto.offset.reset)."""
        known = [o for o in (self.database, self.kafka) if o is not None]
        return max(known) if known else None

    @property
    def mismatch(self) -> bool:
        return self.database != self.kafka


class OffsetStore(GroupTable):
    """The per-partition offset rows of one consumer group."""

    default_table = DEFAULT_TABLE

    def schema(self) -> list[str]:
        return [
            self.create_table(
                "topic TEXT NOT NULL",
                "partition INTEGER NOT NULL",
                f"next_offset BIGINT NOT NULL DEFAULT {UNKNOWN}",
                "PRIMARY KEY (consumer_group, topic, partition)",
            )
        ]

    def ensure_rows(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Create the missing rows (next_offset unknown) so every partition can be locked."""
        rows = [(self.group, topic, partition) for topic, partition in partitions]
        if not rows:
            return
        with self.db.transaction() as tx:
            tx.executemany(
                f"INSERT INTO {self.table} (consumer_group, topic, partition)"
                " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            )

    def lock(self, tx: Transaction, topic: str, partition: int) -> int | None:
        """Lock the partition row for this transaction; return its offset (None: unknown)."""
        row = tx.fetchone(
            f"SELECT next_offset FROM {self.table}"
            " WHERE consumer_group = ? AND topic = ? AND partition = ?" + self.db.dialect.row_lock,
            (self.group, topic, partition),
        )
        if row is None:
            raise DatabaseError(
                f"no row in {self.table} for group {self.group!r} {topic}[{partition}]"
                " (call ensure_rows on assignment)"
            )
        return None if row[0] == UNKNOWN else int(row[0])

    def store(self, tx: Transaction, topic: str, partition: int, next_offset: int) -> None:
        tx.execute(
            f"UPDATE {self.table} SET next_offset = ?"
            " WHERE consumer_group = ? AND topic = ? AND partition = ?",
            (next_offset, self.group, topic, partition),
        )

    def read(self) -> dict[tuple[str, int], int]:
        rows = self.db.execute(
            f"SELECT topic, partition, next_offset FROM {self.table} WHERE consumer_group = ?",
            (self.group,),
        ).fetchall()
        return {(t, p): int(o) for t, p, o in rows if int(o) != UNKNOWN}

    def start_offsets(
        self,
        partitions: Iterable[tuple[str, int]],
        kafka_committed: Callable[[list[tuple[str, int]]], dict[tuple[str, int], int | None]],
        on_locked: Callable[[], None] | None = None,
    ) -> list[StartOffset]:
        """Step 1-2: per partition, wait for the row lock, then max(database, Kafka).

        The lock is held while Kafka's committed offset is read, so a previous owner still
        finishing a batch cannot commit behind our back between the two reads.
        """
        partitions = list(partitions)
        self.ensure_rows(partitions)
        result = []
        for topic, partition in partitions:
            with self.db.transaction() as tx:
                database = self.lock(tx, topic, partition)
                if on_locked is not None:
                    on_locked()
                kafka = kafka_committed([(topic, partition)]).get((topic, partition))
            result.append(StartOffset(topic, partition, database, kafka))
        return result
