"""The database sink's driver side: a batch's offsets (and staged rows) in one transaction.

``commit_batch`` runs in Spark's ``commit(messages, batchId)``:

1. locks the sink's rows of ``onceflow_sink_offsets`` (``SELECT ... FOR UPDATE``;
   SQLite: ``BEGIN IMMEDIATE``),
2. compares the batch's source end offsets (from Spark's offset log) with the stored
   ones: a batch whose end offsets are all at or below them is a replay and a no-op,
3. promotes exactly the staged rows named by the messages into the target table
   (append, upsert by key, or accumulate numeric columns by key), and checks the task
   markers of the rows that tasks wrote directly,
4. stores the batch's end offsets and deletes the sink's staged rows.
"""

from __future__ import annotations

import logging
from typing import Any

from onceflow.crash_points import spark_step_reached
from onceflow.db import Database
from onceflow.spark.database_sink.checkpoint import batch_offsets, previous_offsets, query_id
from onceflow.spark.database_sink.direct import DirectWrite
from onceflow.spark.database_sink.ledger import (
    UnfinishedBatch,
    direct_rows,
    forget_commit,
    lock_sink,
    record_commit,
    unfinished_tasks,
)
from onceflow.spark.database_sink.options import DatabaseSinkOptions, connect
from onceflow.spark.database_sink.staging import BATCH_WRITE, StagedWrite
from onceflow.spark.database_sink.tables import OFFSETS_DDL, OFFSETS_TABLE, SinkTable
from onceflow.spark.kafka_source.offsets import OffsetMap, to_json

log = logging.getLogger(__name__)

NO_KAFKA_TOPIC = ""  # offsets row for sources without Kafka offsets: batch-id protection


class OffsetConflict(RuntimeError):
    """The batch overlaps offsets whose results are already in the database."""


def plan_batch(stored: OffsetMap, start: OffsetMap | None, end: OffsetMap) -> bool:
    """True to commit the batch, False when it is a replay (every end offset <= stored).

    ``stored`` holds the offsets already in the database, ``start`` the batch's start
    offsets (None when unknown: the first batch of a checkpoint), ``end`` its end offsets.
    Raises OffsetConflict when committing would apply some offsets a second time: the
    query and the database disagree (started from other offsets than the database's).
    """
    start = start or {}
    ahead = []
    for tp, stop in end.items():
        if tp in stored:
            if stop > stored[tp]:
                ahead.append(tp)
        elif stop > start.get(tp, 0):
            ahead.append(tp)
    if not ahead:
        return False
    for tp, stop in end.items():
        if tp not in stored:
            continue
        applied = stored[tp]
        begin = start.get(tp)
        # Unknown start: only an end strictly behind the database is a certain overlap.
        overlap = (begin < applied and begin < stop) if begin is not None else stop < applied
        if overlap:
            raise OffsetConflict(
                f"partition {tp[0]}-{tp[1]}: this batch reads offsets "
                f"[{'?' if begin is None else begin}, {stop}) but the database already "
                f"holds results up to {applied}; start the query with "
                "startingOffsets=onceflow.spark.database_offsets(url, sinkId)"
            )
    return True


def _batch_offsets(checkpoint: str, batch_id: int) -> tuple[OffsetMap | None, OffsetMap]:
    end = batch_offsets(checkpoint, batch_id)
    if end is None:  # not a Kafka source: protect by batch id only
        return {(NO_KAFKA_TOPIC, -1): batch_id}, {(NO_KAFKA_TOPIC, -1): batch_id + 1}
    return previous_offsets(checkpoint, batch_id), end


def _promote(
    tx: Any, table: SinkTable, sink_id: str, batch_id: int, writes: list[StagedWrite]
) -> int:
    writes = [w for w in writes if w.rows > 0]
    if not writes:
        return 0
    ids = [w.write_id for w in writes]
    params = [sink_id, batch_id, *ids]
    expected = sum(w.rows for w in writes)
    if table.mode == "append":
        # Every staged row becomes one target row, and a write never holds more rows
        # than its task reported: the promoted count equals the reported one exactly
        # when every write's rows are all there (no separate counting pass needed).
        promoted = tx.execute(table.promote_sql(len(ids)), params).rowcount
        if promoted != expected:
            _check_staged(tx, table, sink_id, batch_id, writes, params)
            raise RuntimeError(
                f"sink {sink_id} batch {batch_id}: tasks staged {expected} rows but "
                f"{promoted} are in the staging table"
            )
        return expected
    _check_staged(tx, table, sink_id, batch_id, writes, params)
    tx.execute(table.promote_sql(len(ids)), params)
    return expected


def _check_staged(
    tx: Any,
    table: SinkTable,
    sink_id: str,
    batch_id: int,
    writes: list[StagedWrite],
    params: list[Any],
) -> None:
    """Raise unless every write's staged row count is the one its task reported."""
    counts = dict(tx.fetchall(table.staged_counts_sql(len(writes)), params))
    for write in writes:
        if counts.get(write.write_id, 0) != write.rows:
            raise RuntimeError(
                f"sink {sink_id} batch {batch_id}: task partition {write.partition} staged "
                f"{write.rows} rows but {counts.get(write.write_id, 0)} are in the staging table"
            )


def _cleanup(
    tx: Any, table: SinkTable, sink_id: str, batch_id: int, promoted: int | None = None
) -> None:
    """Delete the sink's staged rows up to ``batch_id``, inside the promoting transaction.

    ``promoted``: how many staged rows this transaction checked and promoted (all of them
    the sink's, of batch ``batch_id``). On SQLite the transaction holds the database's
    write lock, so nothing is staged meanwhile: when the staging table holds exactly those
    rows, empty it whole, which SQLite does without visiting rows (and counts without
    decoding them).
    """
    if (
        table.dialect.serializes_writers
        and promoted is not None
        and tx.fetchone(table.count_staged_sql())[0] == promoted
    ):
        tx.execute(table.truncate_sql())
    else:
        tx.execute(table.cleanup_sql(), (sink_id, batch_id))


def commit_batch(
    options: DatabaseSinkOptions,
    table: SinkTable,
    messages: list[StagedWrite | DirectWrite | None],
    batch_id: int,
    overwrite: bool = False,
) -> bool:
    """Store a streaming batch's offsets (promoting its staged rows) in one transaction.

    Returns False when the batch was already in the database (a replay).
    """
    assert options.checkpoint is not None
    start, end = _batch_offsets(options.checkpoint, batch_id)
    query = query_id(options.checkpoint)
    staged = [m for m in messages if isinstance(m, StagedWrite)]
    direct = [m for m in messages if isinstance(m, DirectWrite)]
    db = connect(options)
    try:
        with db.transaction() as tx:
            for topic, partition in sorted(end):
                tx.execute(
                    f'INSERT INTO {OFFSETS_TABLE} (sink_id, topic, "partition", next_offset, '
                    "batch_id) VALUES (?, ?, ?, -2, -1) ON CONFLICT DO NOTHING",
                    (options.sink_id, topic, partition),
                )
            rows = tx.fetchall(
                f'SELECT topic, "partition", next_offset, batch_id FROM {OFFSETS_TABLE} '
                f"WHERE sink_id = ?{db.dialect.row_lock}",
                (options.sink_id,),
            )
            stored = {(t, p): o for t, p, o, b in rows if b >= 0}
            lock_sink(tx, options.sink_id, exclusive=True)  # waits for direct task writes
            _check_unfinished(tx, options.sink_id, query, batch_id)
            written = _check_direct(tx, options.sink_id, query, batch_id, direct)
            apply = plan_batch(stored, start, end)
            if apply:
                if overwrite:
                    tx.execute(f"DELETE FROM {table.target}")
                promoted = _promote(tx, table, options.sink_id, batch_id, staged)
                for (topic, partition), offset in sorted(end.items()):
                    tx.execute(
                        f"UPDATE {OFFSETS_TABLE} SET next_offset = ?, batch_id = ? "
                        'WHERE sink_id = ? AND topic = ? AND "partition" = ?',
                        (offset, batch_id, options.sink_id, topic, partition),
                    )
                log.info(
                    "sink %s batch %d: %d rows promoted, %d written by tasks",
                    options.sink_id,
                    batch_id,
                    promoted,
                    written,
                )
                record_commit(tx, options.sink_id, query, batch_id)
                _cleanup(tx, table, options.sink_id, batch_id, promoted if staged else None)
            else:
                if written:
                    raise RuntimeError(
                        f"sink {options.sink_id} batch {batch_id}: tasks wrote {written} rows "
                        "directly, but the batch's offsets are already in the database"
                    )
                tx.execute(
                    f"DELETE FROM {OFFSETS_TABLE} WHERE sink_id = ? AND batch_id = -1",
                    (options.sink_id,),
                )
                log.warning(
                    "sink %s batch %d: already in the database (replayed batch), nothing written",
                    options.sink_id,
                    batch_id,
                )
                if all(stored.get(tp) == offset for tp, offset in end.items()):
                    record_commit(tx, options.sink_id, query, batch_id)
                else:  # a query still replaying what the database holds: keep staging
                    forget_commit(tx, options.sink_id)
                _cleanup(tx, table, options.sink_id, batch_id)
            spark_step_reached("database.before_commit", batch_id)
    finally:
        db.close()
    spark_step_reached("database.after_commit", batch_id)
    return apply


def _check_unfinished(tx: Any, sink_id: str, query: str, batch_id: int) -> None:
    """Refuse to go on when tasks of another batch committed rows whose offsets were never
    stored: their input would be read again and written twice."""
    unfinished = unfinished_tasks(tx, sink_id, query, batch_id)
    if not unfinished:
        return
    other_query, other_batch, _ = unfinished[0]
    partitions = sorted(p for q, b, p in unfinished if (q, b) == (other_query, other_batch))
    raise UnfinishedBatch(
        f"sinkId {sink_id!r}: task partitions {partitions} of batch {other_batch} of "
        f"streaming query {other_query} wrote their rows into the table, but that query "
        "stopped before the batch's offsets were stored (was its checkpoint deleted?). "
        "Restart that query on its checkpoint to finish the batch, or accept those rows "
        f"as they are with DELETE FROM onceflow_sink_tasks WHERE sink_id = '{sink_id}'"
    )


def _check_direct(
    tx: Any, sink_id: str, query: str, batch_id: int, writes: list[DirectWrite]
) -> int:
    """Rows the batch's tasks wrote directly; raises unless each task's marker is there."""
    markers = direct_rows(tx, sink_id, query, batch_id)
    for write in writes:
        if write.rows and not write.skipped and markers.get(write.partition) != write.rows:
            raise RuntimeError(
                f"sink {sink_id} batch {batch_id}: task partition {write.partition} wrote "
                f"{write.rows} rows but its marker says {markers.get(write.partition)}"
            )
    return sum(w.written for w in writes)


def abort_batch(options: DatabaseSinkOptions, table: SinkTable, batch_id: int) -> None:
    """Delete what the tasks of a failed batch staged."""
    with connect(options) as db, db.transaction() as tx:
        tx.execute(table.abort_sql(), (options.sink_id, batch_id))


def commit_batch_write(
    options: DatabaseSinkOptions, table: SinkTable, messages: list[Any], overwrite: bool
) -> None:
    """``df.write``: promote every task's staged rows in one transaction."""
    writes = [m for m in messages if m is not None]
    with connect(options) as db, db.transaction() as tx:
        if overwrite:
            tx.execute(f"DELETE FROM {table.target}")
        promoted = _promote(tx, table, options.sink_id, BATCH_WRITE, writes)
        _cleanup(tx, table, options.sink_id, BATCH_WRITE, promoted)


def database_offsets(url: str, sink_id: str, default: str | None = None) -> str | None:
    """The ``startingOffsets`` JSON of the offsets a sink committed, or ``default``.

    Use it to restart a query whose checkpoint was deleted (or lost) exactly where the
    database is: ``.option("startingOffsets", database_offsets(url, "my-sink", "earliest"))``.
    """
    with Database(url) as db:
        db.script([OFFSETS_DDL])
        rows = db.execute(
            f'SELECT topic, "partition", next_offset FROM {OFFSETS_TABLE} '
            'WHERE sink_id = ? AND batch_id >= 0 AND "partition" >= 0',
            (sink_id,),
        ).fetchall()
    if not rows:
        return default
    return to_json({(t, int(p)): int(o) for t, p, o in rows})
