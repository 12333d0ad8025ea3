"""The database sink's ``staged`` task write: rows into the staging table, promoted later.

Each task inserts its rows into ``<table>_onceflow_stage``, tagged with (sinkId, batchId,
task partition, a random write id), and returns a ``StagedWrite`` naming what it staged.
Nothing is visible in the target table until the driver promotes exactly the named
writes, with the batch's offsets, in one transaction (``commit.commit_batch``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from onceflow.crash_points import spark_step_reached
from onceflow.spark.database_sink.options import DatabaseSinkOptions, connect
from onceflow.spark.database_sink.tables import SinkTable

STAGE_CHUNK_ROWS = 20_000  # rows a task stages per database transaction
BATCH_WRITE = -1  # the batch id staged rows of a ``df.write`` (no micro-batch) carry


@dataclass
class StagedWrite(WriterCommitMessage):
    """What one task staged: rows tagged (sink_id, batch_id, partition, write_id)."""

    sink_id: str
    batch_id: int
    partition: int
    write_id: str
    rows: int


def stage(
    options: DatabaseSinkOptions,
    table: SinkTable,
    batch_id: int,
    partition: int,
    batches: Iterator[Any],
) -> StagedWrite:
    write_id = uuid.uuid4().hex
    rows = 0
    stager = _CopyStager(options, table) if table.dialect.copies_rows else _Stager(options, table)
    try:
        for chunk in chunks(batches, STAGE_CHUNK_ROWS):
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
    spark_step_reached("database.after_stage", batch_id, partition)
    return StagedWrite(options.sink_id, batch_id, partition, write_id, rows)


class _Stager:
    """Staged rows in with ``executemany``, one transaction per chunk."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable) -> None:
        self.db = connect(options)
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
        self.db = connect(options)
        self.statement = table.copy_sql()

    def write(self, rows: list[tuple]) -> None:
        with self.db.transaction():
            self.db.copy_rows(self.statement, rows)

    def close(self) -> None:
        self.db.close()


def chunks(batches: Iterator[Any], rows: int) -> Iterator[list[Any]]:
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
