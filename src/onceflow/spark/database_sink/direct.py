"""The database sink's ``direct`` task write: rows straight into the target table.

A task of the batch that follows the sink's last committed batch, or of any batch of a
new sink (``ledger``), writes its rows into the target table and its marker (sinkId,
batchId, task partition) in ONE transaction; an attempt that finds the marker (a retry, a
speculative copy, the batch replayed after a driver crash) writes nothing. The driver
then stores the batch's end offsets. Every other batch is staged (``staging``).

The task prepares its rows before it opens the transaction, so that on SQLite it holds
the database's write lock only while it inserts: ``upsert`` keeps the last row per key,
``accumulate`` adds up the task's rows per key (a few rows per task for a per-store
total instead of every input row). Keyed rows are written in key order, so that tasks
writing the same keys on PostgreSQL lock them in the same order and never deadlock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from onceflow.crash_points import spark_step_reached
from onceflow.spark.common import current_task
from onceflow.spark.database_sink import arrow
from onceflow.spark.database_sink.ledger import (
    TaskWrite,
    claim_task,
    is_new_sink,
    last_commit,
    lock_sink,
    task_write,
)
from onceflow.spark.database_sink.options import DatabaseSinkOptions, connect
from onceflow.spark.database_sink.staging import BATCH_WRITE, StagedWrite, stage
from onceflow.spark.database_sink.tables import SinkTable

log = logging.getLogger(__name__)


@dataclass
class DirectWrite(WriterCommitMessage):
    """What one task wrote straight into the target table (``skipped``: nothing, the
    batch's rows of this task partition were already there)."""

    sink_id: str
    query_id: str
    batch_id: int
    partition: int
    rows: int  # input rows
    written: int  # rows written after per-task merging by key
    skipped: bool


class SinkStateChanged(RuntimeError):
    """The sink's ledger moved while the task ran: another query writes to this sinkId."""


def write_task(
    options: DatabaseSinkOptions,
    table: SinkTable,
    batches: Iterator[Any],
    direct: bool,
) -> StagedWrite | DirectWrite:
    """One task of the database sink: a direct write when the ledger allows it, else stage."""
    task = current_task()
    partition, batch_id, query_id = task.partition, task.batch_id, task.query_id
    if batch_id is None or query_id is None or not direct:  # batch writes always stage
        staged_as = batch_id if batch_id is not None else BATCH_WRITE
        return stage(options, table, staged_as, partition, batches)
    with connect(options) as db:
        decision = _decide(db, options.sink_id, query_id, batch_id)
    if decision is TaskWrite.STAGE:
        return stage(options, table, batch_id, partition, batches)
    if decision is TaskWrite.SKIP:
        return _skip(options, query_id, batch_id, partition, batches)
    writer = _Task(options, query_id, batch_id, partition)
    received = [batch for batch in batches if batch.num_rows]
    if not received:  # nothing to write: no transaction, no marker needed
        return DirectWrite(options.sink_id, query_id, batch_id, partition, 0, 0, False)
    if arrow.usable(table, received[0].schema):
        data = pa_table(received)
        ingest = arrow.ArrowTransaction(options, table)
        try:
            done = writer.commit(ingest, data.num_rows, lambda: ingest.ingest(data))
            ingest.commit()
        finally:
            ingest.close()
        written = data.num_rows
    else:
        input_rows, rows = prepare_rows(table, iter(received))
        with connect(options) as db, db.transaction() as tx:

            def write() -> None:
                if table.mode == "append" and db.dialect.copies_rows:
                    db.copy_rows(table.copy_target_sql(), rows)
                else:
                    tx.executemany(table.insert_sql(), rows)

            done = writer.commit(tx, input_rows, write)
        written = len(rows)
    if not done:
        return _skipped(options, query_id, batch_id, partition)
    spark_step_reached("database.after_task_commit", batch_id, partition)
    return DirectWrite(options.sink_id, query_id, batch_id, partition, writer.rows, written, False)


@dataclass
class _Task:
    options: DatabaseSinkOptions
    query_id: str
    batch_id: int
    partition: int
    rows: int = 0

    def commit(self, tx: Any, rows: int, write: Callable[[], None]) -> bool:
        """Check the ledger, claim the task's marker and write, in the open transaction
        ``tx``; False (nothing written) when the batch is already in the database."""
        self.rows = rows
        sink_id = self.options.sink_id
        lock_sink(tx, sink_id, exclusive=False)
        decision = _decide(tx, sink_id, self.query_id, self.batch_id)
        if decision is TaskWrite.SKIP:
            return False
        if decision is not TaskWrite.DIRECT:
            raise SinkStateChanged(
                f"sinkId {sink_id!r}: the sink's last committed batch changed while batch "
                f"{self.batch_id} ran; is another query writing with this sinkId?"
            )
        if not claim_task(tx, sink_id, self.batch_id, self.partition, self.query_id, rows):
            return False
        write()
        spark_step_reached("database.before_task_commit", self.batch_id, self.partition)
        return True


def _decide(tx: Any, sink_id: str, query_id: str, batch_id: int) -> TaskWrite:
    last = last_commit(tx, sink_id)
    new_sink = last is None and is_new_sink(tx, sink_id, query_id)
    return task_write(last, query_id, batch_id, new_sink)


def pa_table(batches: list[Any]) -> Any:
    import pyarrow as pa

    return pa.Table.from_batches(batches)


def prepare_rows(table: SinkTable, batches: Iterator[Any]) -> tuple[int, list[tuple]]:
    """(input row count, the rows to write): merged per key for upsert and accumulate."""
    received = [batch for batch in batches if batch.num_rows]
    count = sum(batch.num_rows for batch in received)
    if not received:
        return 0, []
    if table.mode == "append":
        rows: list[tuple] = []
        for batch in received:
            rows += table.rows(batch)
        return count, rows
    import pyarrow as pa

    data = pa.Table.from_batches(received)
    if table.mode == "accumulate":
        return count, _sorted(table, table.rows(_sums(table, data)))
    last: dict[tuple, tuple] = {}
    key_at = [table.columns.index(k) for k in table.keys]
    for row in table.rows(data):  # upsert: the last row of a key wins
        last[tuple(row[i] for i in key_at)] = row
    return count, _sorted(table, list(last.values()))


def _sums(table: SinkTable, data: Any) -> Any:
    """The task's rows added up per key, columns in the table's order."""
    values = [c for c in table.columns if c not in table.keys]
    summed = data.group_by(list(table.keys), use_threads=False).aggregate(
        [(c, "sum") for c in values]
    )
    names = {f"{c}_sum": c for c in values}
    return summed.rename_columns([names.get(c, c) for c in summed.column_names]).select(
        list(table.columns)
    )


def _sorted(table: SinkTable, rows: list[tuple]) -> list[tuple]:
    key_at = [table.columns.index(k) for k in table.keys]
    return sorted(rows, key=lambda row: tuple((row[i] is None, row[i]) for i in key_at))


def _skip(
    options: DatabaseSinkOptions,
    query_id: str,
    batch_id: int,
    partition: int,
    batches: Iterator[Any],
) -> DirectWrite:
    for _ in batches:  # drain: Spark expects the input to be consumed
        pass
    return _skipped(options, query_id, batch_id, partition)


def _skipped(
    options: DatabaseSinkOptions, query_id: str, batch_id: int, partition: int
) -> DirectWrite:
    log.warning(
        "sink %s batch %d partition %d: already in the database, nothing written",
        options.sink_id,
        batch_id,
        partition,
    )
    return DirectWrite(options.sink_id, query_id, batch_id, partition, 0, 0, True)
