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

import importlib.util
import re
from typing import Any

from onceflow.db import DatabaseUrl
from onceflow.spark.database_sink.options import DatabaseSinkOptions
from onceflow.spark.database_sink.tables import SinkTable, check_table_name

_DRIVERS = {"sqlite": "adbc_driver_sqlite", "postgresql": "adbc_driver_postgresql"}


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

    if table.dialect != "postgresql":
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
        if table.dialect == "sqlite":
            import adbc_driver_sqlite.dbapi as sqlite_dbapi

            self.connection = sqlite_dbapi.connect(target, autocommit=True)
            self.cursor = self.connection.cursor()
            self.cursor.execute(f"PRAGMA busy_timeout = {int(options.lock_timeout_ms)}")
            self.cursor.fetchall()
            self.cursor.execute("BEGIN IMMEDIATE")
        else:
            import adbc_driver_postgresql.dbapi as postgresql_dbapi

            self.connection = postgresql_dbapi.connect(target)  # in a transaction from here
            self.cursor = self.connection.cursor()
            self.cursor.execute(f"SET lock_timeout = {int(options.lock_timeout_ms)}")

    def execute(self, sql: str, params: tuple = ()) -> Any:
        if self.table.dialect == "postgresql":
            numbers = iter(range(1, len(params) + 1))
            sql = re.sub(r"\?", lambda _: f"${next(numbers)}", sql)
        self.cursor.execute(sql, params)
        return self.cursor

    def fetchall(self, sql: str, params: tuple = ()) -> list[tuple]:
        return list(self.execute(sql, params).fetchall())

    def ingest(self, data: Any) -> None:
        schema, name = check_table_name(self.table.table)
        kwargs = {"db_schema_name": schema} if schema else {}
        self.cursor.adbc_ingest(name, for_target(self.table, data), mode="append", **kwargs)

    def commit(self) -> None:
        if self.table.dialect == "sqlite":
            self.cursor.execute("COMMIT")
        else:
            self.connection.commit()

    def close(self) -> None:
        """Close; a transaction still open is rolled back."""
        try:
            if self.table.dialect == "sqlite":
                self.cursor.execute("ROLLBACK")
        except Exception:  # no transaction open (committed) or the connection is gone
            pass
        try:
            self.cursor.close()
            self.connection.close()
        except Exception:  # closing a broken connection must not mask the real error
            pass
