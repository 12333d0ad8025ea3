"""``format("onceflow-database")``: an exactly-once database sink (SQLite, PostgreSQL).

Executors *stage* their rows: each task inserts its rows into a staging table, tagged
with (sinkId, batchId, task partition, a random write id), in its own transaction, and
returns a commit message naming what it staged. The driver's ``commit(messages,
batchId)`` then, in ONE database transaction:

1. locks the sink's rows of ``onceflow_sink_offsets`` (``SELECT ... FOR UPDATE``;
   SQLite: ``BEGIN IMMEDIATE``),
2. compares the batch's source end offsets (from Spark's offset log) with the stored
   ones: a batch whose end offsets are all at or below them is a replay and a no-op,
3. promotes exactly the staged rows named by the messages into the target table
   (append, upsert by key, or accumulate numeric columns by key),
4. stores the batch's end offsets and deletes the sink's staged rows.

A query whose checkpoint was deleted resumes where the database is with
``startingOffsets=database_offsets(url, sinkId)``.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from onceflow.spark import crash
from onceflow.spark.checkpoint import batch_offsets, previous_offsets
from onceflow.spark.offsets import OffsetMap, to_json
from onceflow.spark.sink_tables import OFFSETS_DDL, OFFSETS_TABLE, SinkTable

log = logging.getLogger(__name__)

SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
STAGE_CHUNK_ROWS = 20_000  # rows a task stages per database transaction
NO_KAFKA_TOPIC = ""  # offsets row for sources without Kafka offsets: batch-id protection
_KNOWN = {
    "url",
    "table",
    "mode",
    "keycolumns",
    "sinkid",
    "checkpointlocation",
    "locktimeoutms",
    "path",
    "queryname",  # Spark passes writeStream.queryName(...) to the sink as an option
}


class DatabaseSinkError(ValueError):
    """An option of the database sink is missing or wrong."""


class OffsetConflict(RuntimeError):
    """The batch overlaps offsets whose results are already in the database."""


@dataclass(frozen=True)
class DatabaseSinkOptions:
    url: str
    table: str
    mode: str
    keys: tuple[str, ...]
    sink_id: str
    checkpoint: str | None
    lock_timeout_ms: int


def parse_database_options(options: Mapping[str, Any], streaming: bool) -> DatabaseSinkOptions:
    opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise DatabaseSinkError(
            f"unknown option(s) {unknown} for onceflow-database "
            f"(known: url, table, mode, keyColumns, sinkId, checkpointLocation, lockTimeoutMs)"
        )
    for required in ("url", "table"):
        if not opts.get(required):
            raise DatabaseSinkError(f"onceflow-database needs the option {required!r}")
    sink_id = opts.get("sinkid")
    if streaming:
        if not sink_id:
            raise DatabaseSinkError(
                "onceflow-database needs the option 'sinkId' (stable name of this sink: its "
                "offsets in the database are stored under it)"
            )
        if not opts.get("checkpointlocation"):
            raise DatabaseSinkError(
                "onceflow-database needs option('checkpointLocation', ...) on the query itself: "
                "the sink reads each batch's source offsets from Spark's offset log there "
                "(spark.sql.streaming.checkpointLocation does not reach the sink)"
            )
    elif not sink_id:
        sink_id = f"batch-{uuid.uuid4().hex}"
    if not SINK_ID.fullmatch(sink_id):
        raise DatabaseSinkError(f"sinkId {sink_id!r}: use letters, digits, '.', '_' and '-'")
    keys = tuple(k.strip() for k in opts.get("keycolumns", "").split(",") if k.strip())
    try:
        lock_timeout = int(opts.get("locktimeoutms", "60000"))
    except ValueError:
        raise DatabaseSinkError("lockTimeoutMs must be an integer (milliseconds)") from None
    return DatabaseSinkOptions(
        url=opts["url"],
        table=opts["table"],
        mode=opts.get("mode", "append").lower(),
        keys=keys,
        sink_id=sink_id,
        checkpoint=opts.get("checkpointlocation"),
        lock_timeout_ms=lock_timeout,
    )


def _connect(options: DatabaseSinkOptions) -> Any:
    from onceflow.patterns.db import Database

    return Database(
        options.url,
        lock_timeout_ms=options.lock_timeout_ms,
        statement_timeout_ms=max(300_000, options.lock_timeout_ms),
    )


# -- replay protection ----------------------------------------------------------------


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


# -- executors --------------------------------------------------------------------------


@dataclass
class StagedWrite(WriterCommitMessage):
    """What one task staged: rows tagged (sink_id, batch_id, partition, write_id)."""

    sink_id: str
    batch_id: int
    partition: int
    write_id: str
    rows: int


def _stage(options: DatabaseSinkOptions, table: SinkTable, batches: Iterator[Any]) -> StagedWrite:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    batch_prop = context.getLocalProperty("streaming.sql.batchId") if context else None
    batch_id = int(batch_prop) if batch_prop is not None else -1
    write_id = uuid.uuid4().hex
    rows = 0
    stager: _Stager | _CopyStager
    if table.dialect == "postgresql":
        stager = _CopyStager(options, table)
    else:
        stager = _Stager(options, table)
    try:
        for chunk in _chunks(batches, STAGE_CHUNK_ROWS):
            staged: list[tuple] = []
            for batch in chunk:
                staged += table.stage_rows(
                    options.sink_id, batch_id, partition, write_id, rows, batch
                )
                rows += batch.num_rows
            # A short transaction per chunk: on SQLite the write lock is held while rows
            # are inserted, not while the task waits for its input (the other tasks'
            # staging would wait for all of this task's input otherwise). A task that
            # fails after some chunks sends no commit message: its rows are never promoted
            # and are deleted with the batch's staged rows.
            stager.write(staged)
    finally:
        stager.close()
    crash.reached("database.after_stage", batch_id, partition)
    return StagedWrite(options.sink_id, batch_id, partition, write_id, rows)


class _Stager:
    """Staged rows in with ``executemany``, one transaction per chunk."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable) -> None:
        self.db = _connect(options)
        self.statement = table.stage_sql()

    def write(self, rows: list[tuple]) -> None:
        with self.db.transaction() as tx:
            tx.executemany(self.statement, rows)

    def close(self) -> None:
        self.db.close()


class _CopyStager:
    """PostgreSQL: staged rows in with ``COPY ... FROM STDIN`` (several times faster than
    ``executemany``), one transaction per chunk."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable) -> None:
        import psycopg

        from onceflow.patterns.db import DatabaseUrl

        self.connection = psycopg.connect(
            DatabaseUrl.parse(options.url).target, autocommit=True, connect_timeout=10
        )
        self.connection.execute(f"SET lock_timeout = {int(options.lock_timeout_ms)}")
        self.statement = table.copy_sql()

    def write(self, rows: list[tuple]) -> None:
        with (
            self.connection.transaction(),
            self.connection.cursor() as cursor,
            cursor.copy(self.statement) as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:  # closing a broken connection must not mask the real error
            pass


def _chunks(batches: Iterator[Any], rows: int) -> Iterator[list[Any]]:
    """Non-empty Arrow batches grouped into lists of about ``rows`` rows."""
    chunk: list[Any] = []
    size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        chunk.append(batch)
        size += batch.num_rows
        if size >= rows:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


# -- driver -----------------------------------------------------------------------------


def _create_tables(options: DatabaseSinkOptions, table: SinkTable) -> None:
    db = _connect(options)
    try:
        db.script(table.ddl())
    finally:
        db.close()


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
        table.dialect == "sqlite"
        and promoted is not None
        and tx.fetchone(table.count_staged_sql())[0] == promoted
    ):
        tx.execute(table.truncate_sql())
    else:
        tx.execute(table.cleanup_sql(), (sink_id, batch_id))


def commit_batch(
    options: DatabaseSinkOptions,
    table: SinkTable,
    messages: list[StagedWrite | None],
    batch_id: int,
    overwrite: bool = False,
) -> bool:
    """Promote a streaming batch with its offsets in one transaction; False if a replay."""
    assert options.checkpoint is not None
    start, end = _batch_offsets(options.checkpoint, batch_id)
    writes = [m for m in messages if m is not None]
    db = _connect(options)
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
                f"WHERE sink_id = ?{db.lock_clause}",
                (options.sink_id,),
            )
            stored = {(t, p): o for t, p, o, b in rows if b >= 0}
            apply = plan_batch(stored, start, end)
            if apply:
                if overwrite:
                    tx.execute(f"DELETE FROM {table.target}")
                promoted = _promote(tx, table, options.sink_id, batch_id, writes)
                for (topic, partition), offset in sorted(end.items()):
                    tx.execute(
                        f"UPDATE {OFFSETS_TABLE} SET next_offset = ?, batch_id = ? "
                        'WHERE sink_id = ? AND topic = ? AND "partition" = ?',
                        (offset, batch_id, options.sink_id, topic, partition),
                    )
                log.info("sink %s batch %d: %d rows committed", options.sink_id, batch_id, promoted)
                _cleanup(tx, table, options.sink_id, batch_id, promoted)
            else:
                tx.execute(
                    f"DELETE FROM {OFFSETS_TABLE} WHERE sink_id = ? AND batch_id = -1",
                    (options.sink_id,),
                )
                log.warning(
                    "sink %s batch %d: already in the database (replayed batch), nothing written",
                    options.sink_id,
                    batch_id,
                )
                _cleanup(tx, table, options.sink_id, batch_id)
            crash.reached("database.before_commit", batch_id)
    finally:
        db.close()
    crash.reached("database.after_commit", batch_id)
    return apply


def abort_batch(options: DatabaseSinkOptions, table: SinkTable, batch_id: int) -> None:
    db = _connect(options)
    try:
        with db.transaction() as tx:
            tx.execute(table.abort_sql(), (options.sink_id, batch_id))
    finally:
        db.close()


class DatabaseStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: DatabaseSinkOptions, table: SinkTable, overwrite: bool) -> None:
        self.options = options
        self.table = table
        self.overwrite = overwrite

    def write(self, iterator: Iterator[Any]) -> StagedWrite:
        return _stage(self.options, self.table, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        commit_batch(self.options, self.table, messages, batchId, self.overwrite)

    def abort(self, messages: list[Any], batchId: int) -> None:
        abort_batch(self.options, self.table, batchId)


class DatabaseBatchWriter(DataSourceArrowWriter):
    """``df.write``: every task stages, the driver promotes all of it in one transaction."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable, overwrite: bool) -> None:
        self.options = options
        self.table = table
        self.overwrite = overwrite

    def write(self, iterator: Iterator[Any]) -> StagedWrite:
        return _stage(self.options, self.table, iterator)

    def commit(self, messages: list[Any]) -> None:
        writes = [m for m in messages if m is not None]
        db = _connect(self.options)
        try:
            with db.transaction() as tx:
                if self.overwrite:
                    tx.execute(f"DELETE FROM {self.table.target}")
                promoted = _promote(tx, self.table, self.options.sink_id, -1, writes)
                _cleanup(tx, self.table, self.options.sink_id, -1, promoted)
        finally:
            db.close()

    def abort(self, messages: list[Any]) -> None:
        abort_batch(self.options, self.table, -1)


class DatabaseSinkDataSource(DataSource):
    """``format("onceflow-database")``: exactly-once writes to SQLite or PostgreSQL."""

    @classmethod
    def name(cls) -> str:
        return "onceflow-database"

    def _table(self, schema: StructType, streaming: bool, overwrite: bool):
        from onceflow.patterns.db import DatabaseUrl

        options = parse_database_options(self.options, streaming)
        if overwrite and options.mode == "accumulate":
            raise DatabaseSinkError("mode accumulate cannot be combined with overwrite/complete")
        dialect = DatabaseUrl.parse(options.url).dialect
        table = SinkTable.build(options.table, schema, options.mode, options.keys, dialect)
        _create_tables(options, table)
        return options, table

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options, table = self._table(schema, True, overwrite)
        return DatabaseStreamWriter(options, table, overwrite)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options, table = self._table(schema, False, overwrite)
        return DatabaseBatchWriter(options, table, overwrite)


def database_offsets(url: str, sink_id: str, default: str | None = None) -> str | None:
    """The ``startingOffsets`` JSON of the offsets a sink committed, or ``default``.

    Use it to restart a query whose checkpoint was deleted (or lost) exactly where the
    database is: ``.option("startingOffsets", database_offsets(url, "my-sink", "earliest"))``.
    """
    from onceflow.patterns.db import Database

    db = Database(url)
    try:
        db.script([OFFSETS_DDL])
        rows = db.execute(
            f'SELECT topic, "partition", next_offset FROM {OFFSETS_TABLE} '
            'WHERE sink_id = ? AND batch_id >= 0 AND "partition" >= 0',
            (sink_id,),
        ).fetchall()
    finally:
        db.close()
    if not rows:
        return default
    return to_json({(t, int(p)): int(o) for t, p, o in rows})
