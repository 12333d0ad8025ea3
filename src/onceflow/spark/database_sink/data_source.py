"""``format("onceflow-database")``: an exactly-once database sink (SQLite, PostgreSQL).

Two strategies (option ``strategy``):

``direct`` (the default): each task writes its rows straight into the target table,
together with a marker (sinkId, batchId, task partition), in ONE transaction of its own
(``direct``); a task attempt that finds its marker writes nothing. The driver's
``commit(messages, batchId)`` then stores the batch's end offsets. A batch becomes
visible task by task. Tasks write directly only when the stored offsets are exactly
where their batch starts (``ledger``); otherwise (the first batch of a query, a query on
a new checkpoint) they stage, as below.

``staged``: executors *stage* their rows (``staging``) and the driver promotes them with
the offsets in ONE transaction (``commit``): a batch becomes visible all at once.

A query whose checkpoint was deleted resumes where the database is with
``startingOffsets=database_offsets(url, sinkId)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from onceflow.db import DatabaseUrl
from onceflow.spark.database_sink.commit import abort_batch, commit_batch, commit_batch_write
from onceflow.spark.database_sink.direct import DirectWrite, write_task
from onceflow.spark.database_sink.options import (
    DatabaseSinkError,
    DatabaseSinkOptions,
    connect,
    parse_database_options,
)
from onceflow.spark.database_sink.staging import BATCH_WRITE, StagedWrite
from onceflow.spark.database_sink.tables import SinkTable


class _SinkWriter:
    """What the driver hands each task: the parsed options, the table, overwrite or not."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable, overwrite: bool) -> None:
        self.options = options
        self.table = table
        self.overwrite = overwrite


class DatabaseStreamWriter(_SinkWriter, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> StagedWrite | DirectWrite:
        # Complete output mode replaces the table each batch: only staging can do that.
        direct = self.options.strategy == "direct" and not self.overwrite
        return write_task(self.options, self.table, iterator, direct)

    def commit(self, messages: list[Any], batchId: int) -> None:
        commit_batch(self.options, self.table, messages, batchId, self.overwrite)

    def abort(self, messages: list[Any], batchId: int) -> None:
        abort_batch(self.options, self.table, batchId)


class DatabaseBatchWriter(_SinkWriter, DataSourceArrowWriter):
    """``df.write``: every task stages, the driver promotes all of it in one transaction."""

    def write(self, iterator: Iterator[Any]) -> StagedWrite | DirectWrite:
        return write_task(self.options, self.table, iterator, direct=False)

    def commit(self, messages: list[Any]) -> None:
        commit_batch_write(self.options, self.table, messages, self.overwrite)

    def abort(self, messages: list[Any]) -> None:
        abort_batch(self.options, self.table, BATCH_WRITE)


class DatabaseSinkDataSource(DataSource):
    """``format("onceflow-database")``: exactly-once writes to SQLite or PostgreSQL.

    Options (names case-insensitive, as in Spark; docs/spark.md has the details):

    - ``url`` (required): ``sqlite:///PATH`` or ``postgresql://...``.
    - ``table`` (required): target table, ``name`` or ``schema.name``; created from the
      DataFrame's schema if missing.
    - ``mode``: ``append`` (default), ``upsert`` (the row with the same key is replaced)
      or ``accumulate`` (numeric non-key columns are added to the stored row).
    - ``keyColumns``: comma-separated key columns, required for upsert and accumulate.
    - ``strategy``: ``direct`` (default; each task commits its rows) or ``staged`` (the
      driver makes each micro-batch visible at once).
    - ``sinkId`` (required for streaming): stable name the sink's offsets are stored
      under; letters, digits, ``.``, ``_``, ``-``.
    - ``checkpointLocation`` (required for streaming, on the query itself): the sink reads
      each batch's source offsets from Spark's offset log there.
    - ``lockTimeoutMs``: SQLite busy timeout / PostgreSQL ``lock_timeout`` (default 60000).
    """

    @classmethod
    def name(cls) -> str:
        return "onceflow-database"

    def _table(
        self, schema: StructType, streaming: bool, overwrite: bool
    ) -> tuple[DatabaseSinkOptions, SinkTable]:
        options = parse_database_options(self.options, streaming)
        if overwrite and options.mode == "accumulate":
            raise DatabaseSinkError("mode accumulate cannot be combined with overwrite/complete")
        dialect = DatabaseUrl.parse(options.url).dialect
        table = SinkTable.build(options.table, schema, options.mode, options.keys, dialect)
        with connect(options) as db:
            db.script(table.ddl())
        return options, table

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options, table = self._table(schema, True, overwrite)
        return DatabaseStreamWriter(options, table, overwrite)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options, table = self._table(schema, False, overwrite)
        return DatabaseBatchWriter(options, table, overwrite)
