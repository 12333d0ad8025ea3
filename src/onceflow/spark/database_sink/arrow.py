"""Direct append writes that keep rows out of Python: Arrow batches ingested with ADBC.

The ADBC drivers for SQLite and PostgreSQL (``adbc-driver-sqlite``,
``adbc-driver-postgresql``) bind Arrow columns to SQLite statements, or stream them to
PostgreSQL as binary ``COPY``, in C: a task's rows never become Python objects. The
task's marker and its ledger check go through the same connection, so they stay in ONE
transaction with the rows (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the sink's advisory
lock held shared, as in ``direct``).

Used for append mode when the driver is installed and every column has a plain type
(strings, binary, integers, floating point, booleans); otherwise the task builds Python
rows (``direct``). The driver's SQLite is a second copy of the SQLite library in the
task's process, so no ``sqlite3`` connection to the file is open while it writes.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from onceflow.db import DatabaseUrl
from onceflow.spark.database_sink.options import DatabaseSinkOptions
from onceflow.spark.database_sink.tables import SinkTable, check_table_name
from onceflow.sql_dialect import Dialect

_DRIVERS = {Dialect.SQLITE: "adbc_driver_sqlite", Dialect.POSTGRESQL: "adbc_driver_postgresql"}


def usable(table: SinkTable, schema: Any) -> bool:
    """True when the ADBC driver of the table's database is installed and every column of
    the Arrow ``schema`` can be ingested as it is (after ``for_target``)."""
    import pyarrow as pa

    if table.mode != "append" or importlib.util.find_spec(_DRIVERS[table.dialect]) is None:
        return False
    plain = (
        pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
        pa.types.is_large_binary, pa.types.is_integer, pa.types.is_floating,
        pa.types.is_boolean,
    )  # fmt: skip
    return all(any(test(field.type) for test in plain) for field in schema)


def for_target(table: SinkTable, data: Any) -> Any:
    """``data`` with the column types of the table's DDL: PostgreSQL's binary COPY needs
    exact types (tinyint/smallint are INTEGER columns, float is DOUBLE PRECISION)."""
    import pyarrow as pa

    if not table.dialect.copies_rows:
        return data
    fields = []
    for field in data.schema:
        if pa.types.is_int8(field.type) or pa.types.is_int16(field.type):
            field = field.with_type(pa.int32())
        elif pa.types.is_float32(field.type) or pa.types.is_float16(field.type):
            field = field.with_type(pa.float64())
        fields.append(field)
    return data.cast(pa.schema(fields))


class ArrowTransaction:
    """One ADBC connection and transaction; ``execute`` takes ``?`` placeholders."""

    def __init__(self, options: DatabaseSinkOptions, table: SinkTable) -> None:
        self.table = table
        self.dialect = table.dialect
        target = DatabaseUrl.parse(options.url).target
        dbapi = importlib.import_module(f"{_DRIVERS[self.dialect]}.dbapi")
        # ADBC's SQLite driver would begin a deferred transaction: it runs in autocommit
        # and the transaction is begun here, with BEGIN IMMEDIATE (the write lock at once).
        # ADBC's PostgreSQL driver is in a transaction from the connect on.
        self._begins_here = self.dialect is Dialect.SQLITE
        self.connection = dbapi.connect(target, autocommit=self._begins_here)
        self.cursor = self.connection.cursor()
        for setting in self.dialect.session_settings(options.lock_timeout_ms):
            self.cursor.execute(setting)
            if self.cursor.description is not None:  # SQLite's PRAGMA answers with a row
                self.cursor.fetchall()
        if self._begins_here:
            self.cursor.execute(self.dialect.begin)

    def execute(self, sql: str, params: tuple = ()) -> Any:
        self.cursor.execute(self.dialect.numbered_placeholders(sql), params)
        return self.cursor

    def fetchall(self, sql: str, params: tuple = ()) -> list[tuple]:
        return list(self.execute(sql, params).fetchall())

    def ingest(self, data: Any) -> None:
        schema, name = check_table_name(self.table.table)
        kwargs = {"db_schema_name": schema} if schema else {}
        self.cursor.adbc_ingest(name, for_target(self.table, data), mode="append", **kwargs)

    def commit(self) -> None:
        if self._begins_here:
            self.cursor.execute("COMMIT")
        else:
            self.connection.commit()

    def close(self) -> None:
        """Close; a transaction still open is rolled back."""
        try:
            if self._begins_here:
                self.cursor.execute("ROLLBACK")
        except Exception:  # no transaction open (committed) or the connection is gone
            pass
        try:
            self.cursor.close()
            self.connection.close()
        except Exception:  # closing a broken connection must not mask the real error
            pass
