"""The database sink's ledger of direct writes: which batch the stored offsets belong to,
and which tasks of the batch in flight have committed their rows.

``onceflow_sink_commits(sink_id, query_id, batch_id)`` says: the sink's offsets in
``onceflow_sink_offsets`` are exactly the end offsets of batch ``batch_id`` of streaming
query ``query_id`` (Spark's query id, stable across restarts on one checkpoint). Only then,
or when nothing of the sink is in the database yet, can the tasks of the query's next batch
write straight into the target table: their input starts where the database ends. Any
other batch is staged and promoted by the driver, which compares its offsets with the
stored ones (the first batch of a query on a new checkpoint, a replay of data the database
already holds).

``onceflow_sink_tasks(sink_id, batch_id, partition, query_id, row_count)`` holds one
marker per task that committed a direct write, written in the task's own transaction:
an attempt that finds its marker writes nothing. The driver deletes a batch's markers
when it commits the batch; markers that outlive their query are rows in the table whose
offsets were never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

OFFSETS_TABLE = "onceflow_sink_offsets"
COMMITS_TABLE = "onceflow_sink_commits"
TASKS_TABLE = "onceflow_sink_tasks"
COMMITS_DDL = (
    f"CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} (sink_id TEXT NOT NULL PRIMARY KEY, "
    "query_id TEXT NOT NULL, batch_id BIGINT NOT NULL)"
)
TASKS_DDL = (
    f"CREATE TABLE IF NOT EXISTS {TASKS_TABLE} (sink_id TEXT NOT NULL, "
    'batch_id BIGINT NOT NULL, "partition" INTEGER NOT NULL, query_id TEXT NOT NULL, '
    'row_count BIGINT NOT NULL, PRIMARY KEY (sink_id, batch_id, "partition"))'
)


class TaskWrite(Enum):
    DIRECT = "direct"  # rows straight into the target table, with a task marker
    STAGE = "stage"  # rows into the staging table, promoted by the driver
    SKIP = "skip"  # the batch is already in the database


@dataclass(frozen=True)
class LastCommit:
    query_id: str
    batch_id: int


class UnfinishedBatch(RuntimeError):
    """Tasks of a batch wrote rows directly but the batch's offsets were never stored."""


def last_commit(tx: Any, sink_id: str) -> LastCommit | None:
    """The batch the stored offsets belong to, None when they belong to no batch."""
    row = tx.execute(
        f"SELECT query_id, batch_id FROM {COMMITS_TABLE} WHERE sink_id = ?", (sink_id,)
    ).fetchone()
    return LastCommit(row[0], int(row[1])) if row else None


def lock_sink(tx: Any, sink_id: str, exclusive: bool) -> None:
    """PostgreSQL: tasks writing directly hold the sink's lock shared, the driver's commit
    exclusive, so no task transaction is open while the driver commits (SQLite's BEGIN
    IMMEDIATE already serializes every writer)."""
    lock = tx.dialect.advisory_lock("hashtext(?)", shared=not exclusive)
    if lock is not None:
        tx.execute(lock, (f"onceflow-sink:{sink_id}",)).fetchall()


def is_new_sink(tx: Any, sink_id: str, query_id: str) -> bool:
    """Nothing of the sink is in the database: no stored offsets, and no marker of another
    query (a batch whose tasks committed but whose offsets were never stored)."""
    stored = tx.execute(
        f"SELECT 1 FROM {OFFSETS_TABLE} WHERE sink_id = ? AND batch_id >= 0 LIMIT 1",
        (sink_id,),
    ).fetchall()
    if stored:
        return False
    foreign = tx.execute(
        f"SELECT 1 FROM {TASKS_TABLE} WHERE sink_id = ? AND query_id <> ? LIMIT 1",
        (sink_id, query_id),
    ).fetchall()
    return not foreign


def task_write(
    last: LastCommit | None, query_id: str, batch_id: int, new_sink: bool = False
) -> TaskWrite:
    """How a task of ``batch_id`` of ``query_id`` writes, given the sink's last commit
    (``new_sink``: nothing of the sink is in the database yet, see ``is_new_sink``)."""
    if last is None:
        return TaskWrite.DIRECT if new_sink else TaskWrite.STAGE
    if last.query_id != query_id:
        return TaskWrite.STAGE
    if batch_id <= last.batch_id:
        return TaskWrite.SKIP
    if batch_id == last.batch_id + 1:
        return TaskWrite.DIRECT
    return TaskWrite.STAGE


def claim_task(
    tx: Any, sink_id: str, batch_id: int, partition: int, query_id: str, rows: int
) -> bool:
    """Write the task's marker; False when an attempt of the task already wrote it
    (PostgreSQL waits for a concurrent attempt's transaction to end first)."""
    claimed = tx.execute(
        f'INSERT INTO {TASKS_TABLE} (sink_id, batch_id, "partition", query_id, row_count) '
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
        (sink_id, batch_id, partition, query_id, rows),
    ).fetchall()
    return len(claimed) == 1


def unfinished_tasks(tx: Any, sink_id: str, query_id: str, batch_id: int) -> list[tuple]:
    """Markers of other batches or queries than (query_id, batch_id): (query, batch, partition)."""
    return tx.fetchall(
        f'SELECT query_id, batch_id, "partition" FROM {TASKS_TABLE} WHERE sink_id = ? '
        'AND NOT (query_id = ? AND batch_id = ?) ORDER BY batch_id, "partition"',
        (sink_id, query_id, batch_id),
    )


def direct_rows(tx: Any, sink_id: str, query_id: str, batch_id: int) -> dict[int, int]:
    """Rows each task partition of the batch wrote directly, from its marker."""
    return dict(
        tx.fetchall(
            f'SELECT "partition", row_count FROM {TASKS_TABLE} '
            "WHERE sink_id = ? AND query_id = ? AND batch_id = ?",
            (sink_id, query_id, batch_id),
        )
    )


def record_commit(tx: Any, sink_id: str, query_id: str, batch_id: int) -> None:
    """The stored offsets are now batch ``batch_id``'s end offsets; its markers go."""
    tx.execute(
        f"INSERT INTO {COMMITS_TABLE} (sink_id, query_id, batch_id) VALUES (?, ?, ?) "
        "ON CONFLICT (sink_id) DO UPDATE SET query_id = excluded.query_id, "
        "batch_id = excluded.batch_id",
        (sink_id, query_id, batch_id),
    )
    tx.execute(
        f"DELETE FROM {TASKS_TABLE} WHERE sink_id = ? AND query_id = ? AND batch_id <= ?",
        (sink_id, query_id, batch_id),
    )


def forget_commit(tx: Any, sink_id: str) -> None:
    """The stored offsets belong to no batch of a running query: the next batch stages."""
    tx.execute(f"DELETE FROM {COMMITS_TABLE} WHERE sink_id = ?", (sink_id,))
