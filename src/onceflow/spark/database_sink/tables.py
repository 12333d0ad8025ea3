"""SQL for the database sink: target, staging and offsets tables, and the promote step.

Written once for SQLite and PostgreSQL with ``?`` placeholders; what differs comes from the
table's ``Dialect`` (``onceflow.sql_dialect``). Identifiers are validated and quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from itertools import repeat
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from onceflow.db import quote_identifier as quote
from onceflow.spark.database_sink.ledger import COMMITS_DDL, OFFSETS_TABLE, TASKS_DDL
from onceflow.sql_dialect import Dialect

MODES = ("append", "upsert", "accumulate")
# Columns the staging table adds in front of the data columns.
STAGE_COLUMNS = ("onceflow_sink_id", "onceflow_batch_id", "onceflow_partition", "onceflow_write_id")
STAGE_SEQ = "onceflow_seq"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)


class SinkTableError(ValueError):
    """The table name, schema or mode cannot be used."""


def check_table_name(table: str) -> tuple[str | None, str]:
    """``table`` or ``schema.table`` of plain identifiers → (schema, table)."""
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise SinkTableError(
            f"table {table!r}: use a plain identifier or schema.table (letters, digits, _)"
        )
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def sql_type(data_type: DataType, dialect: Dialect) -> str:
    if isinstance(data_type, StringType):
        return "TEXT"
    if isinstance(data_type, LongType):
        return "BIGINT"
    if isinstance(data_type, IntegerType | ShortType | ByteType):
        return "INTEGER"
    if isinstance(data_type, DoubleType | FloatType):
        return dialect.double
    if isinstance(data_type, DecimalType):
        return f"NUMERIC({data_type.precision}, {data_type.scale})"
    if isinstance(data_type, BooleanType):
        return "BOOLEAN"
    if isinstance(data_type, BinaryType):
        return dialect.blob
    if isinstance(data_type, TimestampType):
        return dialect.timestamp_tz
    if isinstance(data_type, TimestampNTZType):
        return dialect.timestamp
    if isinstance(data_type, DateType):
        return dialect.date
    raise SinkTableError(
        f"column type {data_type.simpleString()} is not supported by the database sink "
        "(cast it, e.g. to_json() for structs and arrays)"
    )


def _bound_as_text(arrow_type: Any) -> bool:
    """Decimal, temporal and nested values: what a driver without ``binds_rich_values``
    takes as text."""
    import pyarrow as pa

    return (
        pa.types.is_decimal(arrow_type)
        or pa.types.is_temporal(arrow_type)
        or pa.types.is_nested(arrow_type)
    )


def _as_text(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


@dataclass(frozen=True)
class SinkTable:
    """The target table of one sink, its staging table and the SQL to move rows."""

    table: str
    columns: tuple[str, ...]
    types: tuple[DataType, ...]
    mode: str
    keys: tuple[str, ...]
    dialect: Dialect

    @classmethod
    def build(
        cls, table: str, schema: StructType, mode: str, keys: tuple[str, ...], dialect: Dialect
    ) -> SinkTable:
        check_table_name(table)
        if mode not in MODES:
            raise SinkTableError(f"mode {mode!r}: use one of {', '.join(MODES)}")
        columns = tuple(field.name for field in schema.fields)
        if not columns:
            raise SinkTableError("the DataFrame has no columns")
        for name in columns:
            if not _IDENTIFIER.fullmatch(name) or name.lower().startswith("onceflow_"):
                raise SinkTableError(
                    f"column {name!r}: use plain identifiers not starting with onceflow_"
                    " (alias the column)"
                )
        types = tuple(field.dataType for field in schema.fields)
        for data_type in types:
            sql_type(data_type, dialect)
        if mode == "append":
            if keys:
                raise SinkTableError("keyColumns are only used by modes upsert and accumulate")
        else:
            if not keys:
                raise SinkTableError(f"mode {mode} needs the option keyColumns")
            missing = [k for k in keys if k not in columns]
            if missing:
                raise SinkTableError(f"keyColumns {missing} are not columns of the DataFrame")
        if mode == "accumulate":
            for name, data_type in zip(columns, types, strict=True):
                if name not in keys and not isinstance(data_type, NUMERIC):
                    raise SinkTableError(
                        f"mode accumulate adds up the non-key columns, but {name!r} is "
                        f"{data_type.simpleString()}: make it a key column or drop it"
                    )
        return cls(table, columns, types, mode, keys, dialect)

    # -- names -------------------------------------------------------------------------

    @property
    def target(self) -> str:
        return ".".join(quote(p) for p in self.table.split("."))

    @property
    def staging(self) -> str:
        schema, name = check_table_name(self.table)
        staged = quote(f"{name}_onceflow_stage")
        return f"{quote(schema)}.{staged}" if schema else staged

    # -- DDL ---------------------------------------------------------------------------

    def ddl(self) -> list[str]:
        column_defs = [
            f"{quote(c)} {sql_type(t, self.dialect)}"
            for c, t in zip(self.columns, self.types, strict=True)
        ]
        target = list(column_defs)
        if self.keys:
            target.append(f"PRIMARY KEY ({', '.join(quote(k) for k in self.keys)})")
        # The staging table has no index: it only holds the rows of batches in flight,
        # which promotion reads all of anyway, and an index would cost more on every
        # staged row (and on deleting it) than it saves there. On PostgreSQL it is
        # UNLOGGED (no WAL for rows that live one micro-batch): a server crash empties
        # it; a batch whose staged rows are gone then fails its commit (the query stops)
        # and is run again when the query restarts, like after any failed commit.
        return [
            f"CREATE TABLE IF NOT EXISTS {self.target} ({', '.join(target)})",
            f"{self.dialect.create_scratch_table} IF NOT EXISTS {self.staging} ("
            "onceflow_sink_id TEXT NOT NULL, onceflow_batch_id BIGINT NOT NULL, "
            "onceflow_partition INTEGER NOT NULL, onceflow_write_id TEXT NOT NULL, "
            f"onceflow_seq BIGINT NOT NULL, {', '.join(column_defs)})",
            OFFSETS_DDL,
            COMMITS_DDL,
            TASKS_DDL,
        ]

    # -- staging (executors) -------------------------------------------------------------

    def stage_sql(self) -> str:
        names = [*STAGE_COLUMNS, STAGE_SEQ, *self.columns]
        return (
            f"INSERT INTO {self.staging} ({', '.join(quote(n) for n in names)}) "
            f"VALUES ({', '.join('?' for _ in names)})"
        )

    def copy_sql(self) -> str:
        """PostgreSQL ``COPY`` of staged rows, columns in ``stage_rows`` order."""
        names = [*STAGE_COLUMNS, STAGE_SEQ, *self.columns]
        return f"COPY {self.staging} ({', '.join(quote(n) for n in names)}) FROM STDIN"

    def stage_rows(
        self, sink_id: str, batch_id: int, partition: int, write_id: str, seq: int, batch: Any
    ) -> list[tuple]:
        """Rows of one Arrow record batch, tagged for the staging table.

        The tag columns are repeats zipped in C with the data columns (see ``rows``).
        """
        n = batch.num_rows
        tag = (repeat(sink_id, n), repeat(batch_id, n), repeat(partition, n), repeat(write_id, n))
        return list(zip(*tag, range(seq, seq + n), *self._values(batch), strict=True))

    def rows(self, data: Any) -> list[tuple]:
        """Rows of an Arrow record batch or table, in the table's column order."""
        return list(zip(*self._values(data), strict=True))

    def _values(self, data: Any) -> list[list[Any]]:
        """Python values column by column: only the columns the driver cannot bind
        (SQLite: decimals, dates, timestamps) are converted value by value."""
        columns = []
        for column in data.columns:
            values = column.to_pylist()
            if not self.dialect.binds_rich_values and _bound_as_text(column.type):
                values = [_as_text(v) for v in values]
            columns.append(values)
        return columns

    # -- direct writes (executors) -------------------------------------------------------

    def copy_target_sql(self) -> str:
        """PostgreSQL ``COPY`` of rows straight into the target table (append mode)."""
        return f"COPY {self.target} ({', '.join(quote(c) for c in self.columns)}) FROM STDIN"

    def insert_sql(self) -> str:
        """INSERT of one row into the target table, merged by mode on a key conflict."""
        cols = ", ".join(quote(c) for c in self.columns)
        values = f"VALUES ({', '.join('?' for _ in self.columns)})"
        if self.mode == "append":
            return f"INSERT INTO {self.target} ({cols}) {values}"
        return (
            f"INSERT INTO {self.target} AS onceflow_target ({cols}) {values} "
            f"ON CONFLICT ({', '.join(quote(k) for k in self.keys)}) {self._merge()}"
        )

    def _merge(self) -> str:
        """What a key conflict does: replace (upsert) or add up (accumulate) the values."""
        values = [c for c in self.columns if c not in self.keys]
        if not values:
            return "DO NOTHING"
        if self.mode == "upsert":
            update = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in values)
        else:
            update = ", ".join(
                f"{quote(c)} = COALESCE(onceflow_target.{quote(c)}, 0) "
                f"+ COALESCE(excluded.{quote(c)}, 0)"
                for c in values
            )
        return f"DO UPDATE SET {update}"

    # -- promote (driver) ----------------------------------------------------------------

    def _staged(self, write_ids: int) -> str:
        marks = ", ".join("?" for _ in range(write_ids))
        return (
            f"FROM {self.staging} WHERE onceflow_sink_id = ? AND onceflow_batch_id = ? "
            f"AND onceflow_write_id IN ({marks})"
        )

    def promote_sql(self, write_ids: int) -> str:
        """INSERT ... SELECT from the staging rows named by ``write_ids`` placeholders."""
        cols = ", ".join(quote(c) for c in self.columns)
        staged = self._staged(write_ids)
        if self.mode == "append":
            return (
                f"INSERT INTO {self.target} ({cols}) SELECT {cols} {staged} "
                "ORDER BY onceflow_partition, onceflow_seq"
            )
        keys = ", ".join(quote(k) for k in self.keys)
        values = [c for c in self.columns if c not in self.keys]
        if self.mode == "upsert":
            # Last row per key wins (task partition order, then row order within a task).
            source = (
                f"SELECT {cols} FROM (SELECT {cols}, ROW_NUMBER() OVER (PARTITION BY {keys} "
                f"ORDER BY onceflow_partition DESC, onceflow_seq DESC) AS onceflow_rank "
                f"{staged}) AS onceflow_ranked WHERE onceflow_rank = 1"
            )
        else:  # accumulate
            sums = ", ".join(f"SUM({quote(c)}) AS {quote(c)}" for c in values)
            selected = ", ".join(x for x in (keys, sums) if x)
            source = (
                f"SELECT {cols} FROM (SELECT {selected} {staged} GROUP BY {keys}) "
                "AS onceflow_batch WHERE true"
            )
        return (
            f"INSERT INTO {self.target} AS onceflow_target ({cols}) {source} "
            f"ON CONFLICT ({keys}) {self._merge()}"
        )

    def staged_counts_sql(self, write_ids: int) -> str:
        staged = self._staged(write_ids)
        return f"SELECT onceflow_write_id, COUNT(*) {staged} GROUP BY onceflow_write_id"

    def cleanup_sql(self) -> str:
        """Delete a sink's staged rows up to a batch (every attempt, promoted or not)."""
        return f"DELETE FROM {self.staging} WHERE onceflow_sink_id = ? AND onceflow_batch_id <= ?"

    def count_staged_sql(self) -> str:
        return f"SELECT COUNT(*) FROM {self.staging}"

    def truncate_sql(self) -> str:
        """Empty the staging table (SQLite erases a table without visiting its rows)."""
        return f"DELETE FROM {self.staging}"

    def abort_sql(self) -> str:
        return f"DELETE FROM {self.staging} WHERE onceflow_sink_id = ? AND onceflow_batch_id = ?"


OFFSETS_DDL = (
    f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} ("
    'sink_id TEXT NOT NULL, topic TEXT NOT NULL, "partition" INTEGER NOT NULL, '
    "next_offset BIGINT NOT NULL, batch_id BIGINT NOT NULL, "
    'PRIMARY KEY (sink_id, topic, "partition"))'
)
