"""``format("onceflow-database")``: an exactly-once database sink (SQLite, PostgreSQL).

Two strategies (option ``strategy``):

``direct`` (the default): each task writes its rows straight into the target table,
together with a marker (sinkId, batchId, task partition), in ONE transaction of its own
(``sink_direct``); a task attempt that finds its marker writes nothing. The driver's
``commit(messages, batchId)`` then stores the batch's end offsets. A batch becomes
visible task by task. Tasks write directly only when the stored offsets are exactly
where their batch starts (``sink_ledger``); otherwise (the first batch of a query, a
query on a new checkpoint) they stage, as below.

``staged``: executors *stage* their rows (``sink_staging``) and the driver promotes them
with the offsets in ONE transaction: a batch becomes visible all at once. The driver:

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
)
from pyspark.sql.types import StructType

from onceflow.spark import crash
from onceflow.spark.checkpoint import batch_offsets, previous_offsets, query_id
from onceflow.spark.offsets import OffsetMap, to_json
from onceflow.spark.sink_direct import DirectWrite, write_task
from onceflow.spark.sink_ledger import (
    UnfinishedBatch,
    direct_rows,
    forget_commit,
    lock_sink,
    record_commit,
    unfinished_tasks,
)
from onceflow.spark.sink_staging import StagedWrite, connect
from onceflow.spark.sink_tables import OFFSETS_DDL, OFFSETS_TABLE, SinkTable

log = logging.getLogger(__name__)

SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
STRATEGIES = ("direct", "staged")
NO_KAFKA_TOPIC = ""  # offsets row for sources without Kafka offsets: batch-id protection
_KNOWN = {
    "url",
    "table",
    "mode",
    "keycolumns",
    "sinkid",
    "checkpointlocation",
    "locktimeoutms",
    "strategy",
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
    strategy: str = "direct"


def parse_database_options(options: Mapping[str, Any], streaming: bool) -> DatabaseSinkOptions:
    opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise DatabaseSinkError(
            f"unknown option(s) {unknown} for onceflow-database "
            "(known: url, table, mode, keyColumns, strategy, sinkId, checkpointLocation, "
            "lockTimeoutMs)"
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
    if lock_timeout <= 0:
        raise DatabaseSinkError(f"lockTimeoutMs must be positive, not {lock_timeout}")
    strategy = opts.get("strategy", "direct").lower()
    if strategy not in STRATEGIES:
        raise DatabaseSinkError(
            f"strategy {opts['strategy']!r}: use direct (each task commits its rows) or "
            "staged (the driver makes each batch visible at once)"
        )
    return DatabaseSinkOptions(
        url=opts["url"],
        table=opts["table"],
        mode=opts.get("mode", "append").lower(),
        keys=keys,
        sink_id=sink_id,
        checkpoint=opts.get("checkpointlocation"),
        lock_timeout_ms=lock_timeout,
        strategy=strategy,
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


# -- driver -----------------------------------------------------------------------------


def _create_tables(options: DatabaseSinkOptions, table: SinkTable) -> None:
    db = connect(options)
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
                f"WHERE sink_id = ?{db.lock_clause}",
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
            crash.reached("database.before_commit", batch_id)
    finally:
        db.close()
    crash.reached("database.after_commit", batch_id)
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
    db = connect(options)
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

    def write(self, iterator: Iterator[Any]) -> StagedWrite | DirectWrite:
        # Complete output mode replaces the table each batch: only staging can do that.
        direct = self.options.strategy == "direct" and not self.overwrite
        return write_task(self.options, self.table, iterator, direct)

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

    def write(self, iterator: Iterator[Any]) -> StagedWrite | DirectWrite:
        return write_task(self.options, self.table, iterator, direct=False)

    def commit(self, messages: list[Any]) -> None:
        writes = [m for m in messages if m is not None]
        db = connect(self.options)
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
