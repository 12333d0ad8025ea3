"""Rows of a database table (or a query's result) as an audit sink.

Every failure is one ``SourceError`` line naming what failed: a database that cannot be
opened or reached, a table or query the database refuses, or a column the audit was told
to use (``order_by``, the id and key fields) that the rows do not have. The columns are
checked before any row is read because SQLite reads ``ORDER BY "nosuch"`` as a string
and would sort by nothing, silently.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from onceflow.configuration_error import ConfigurationError
from onceflow.db import DatabaseUrl, quote_identifier
from onceflow.sql_dialect import Dialect
from onceflow.verify.audit import OutputRecord, Sink, Unreadable
from onceflow.verify.extract import ExtractError, Extractor
from onceflow.verify.sources.errors import SourceError

# (column, the options that name it), checked against the rows' columns
Needed = Sequence[tuple[str, str]]


def _quote_identifier(name: str) -> str:
    return ".".join(quote_identifier(part) for part in name.split("."))


def _first_line(error: BaseException) -> str:
    """A driver's error on one line (psycopg adds the statement and a caret below)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _connect(url: str) -> tuple[Any, Dialect]:
    """(DB-API connection whose cursors yield dict rows, dialect) for a database URL."""
    try:
        parsed = DatabaseUrl.parse(url)
    except ConfigurationError as error:
        raise SourceError(str(error)) from None
    if parsed.dialect is Dialect.SQLITE:
        return _connect_sqlite(parsed.target), parsed.dialect
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:  # pragma: no cover - psycopg is optional
        raise SourceError("PostgreSQL needs psycopg 3: pip install 'onceflow[postgres]'") from None
    try:
        connection = psycopg.connect(parsed.target, row_factory=dict_row, connect_timeout=10)
    except psycopg.Error as error:
        raise SourceError(f"cannot connect to PostgreSQL: {_first_line(error)}") from None
    return connection, parsed.dialect


def _connect_sqlite(path: str) -> sqlite3.Connection:
    if path == ":memory:":
        raise SourceError("an in-memory SQLite database cannot be audited")
    if not Path(path).is_file():
        raise SourceError(f"cannot open SQLite database {path}: no such file")
    try:
        connection = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise SourceError(f"cannot open SQLite database {path}: {error}") from None
    connection.row_factory = sqlite3.Row
    return connection


def _require_columns(cursor: Any, what: str, needed: Needed, dialect: Dialect) -> None:
    """SourceError for the first needed column the cursor's rows do not have."""
    columns = [description[0] for description in cursor.description or ()]
    for column, options in needed:
        if column in columns:
            continue
        # SQLite matches column names without regard to case (ORDER BY "Store" is store).
        ignore_case = dialect.quoted_names_ignore_case
        if ignore_case and column.casefold() in {c.casefold() for c in columns}:
            continue
        raise SourceError(
            f"{what} has no column {column!r} (its columns: {', '.join(columns)}): "
            f"is {options} spelled right?"
        )


def _statements(table: str, order_by: str | None, dialect: Dialect) -> list[str]:
    """The SELECTs to try in turn for a table's rows in their order."""
    base = f"SELECT * FROM {_quote_identifier(table)}"
    if order_by:
        return [f"{base} ORDER BY {_quote_identifier(order_by)}"]
    if dialect.insertion_order is not None:  # e.g. rowid tables
        return [f"{base} ORDER BY {dialect.insertion_order}", base]
    return [base]


def _table_rows(
    connection: Any, dialect: Dialect, table: str, order_by: str | None, needed: Needed
) -> Iterator[dict]:
    empty = connection.execute(f"SELECT * FROM {_quote_identifier(table)} WHERE 1 = 0")
    if order_by:
        needed = [(order_by.rpartition(".")[2], "--order-by"), *needed]
    _require_columns(empty, f"table {table!r}", needed, dialect)
    statements = _statements(table, order_by, dialect)
    for position, statement in enumerate(statements):
        try:
            cursor = connection.execute(statement)
        except sqlite3.OperationalError:
            if position + 1 < len(statements):
                continue  # not a rowid table
            raise
        for row in cursor:
            yield dict(row)
        return


def _rows(
    url: str, table: str | None, query: str | None, order_by: str | None, needed: Needed
) -> Iterator[dict]:
    connection, dialect = _connect(url)
    try:
        if table is not None:
            yield from _table_rows(connection, dialect, table, order_by, needed)
            return
        cursor = connection.execute(query)
        _require_columns(cursor, "the query's result", needed, dialect)
        for row in cursor:
            yield dict(row)
    except (sqlite3.Error, _psycopg_error()) as error:
        failed = f"cannot read table {table!r}" if table is not None else "cannot run the query"
        raise SourceError(f"{failed}: {_first_line(error)}") from None
    finally:
        connection.close()


def _psycopg_error() -> type[BaseException]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is optional
        return sqlite3.Error
    return psycopg.Error


def read_table(
    url: str,
    extractor: Extractor,
    *,
    table: str | None = None,
    query: str | None = None,
    order_by: str | None = None,
    check_order: bool | None = None,
    check_columns: bool = False,
) -> Sink:
    """Rows of a table (or a query's result) as a sink, positions in row order.

    Order is only checked when it is defined: a query (which should ORDER BY), an
    explicit ``order_by`` column, or a SQLite table (rowid order). Pass ``check_order`` to
    override. A database that cannot be read, or an ``order_by`` column the table lacks,
    is a SourceError. With ``check_columns`` so is an id or key column the rows lack;
    without it each row is then an unreadable record.
    """
    if (table is None) == (query is None):
        raise SourceError("give exactly one of a table or a query")
    if check_order is None:
        check_order = bool(query or order_by or url.startswith("sqlite:"))
    needed = []
    if check_columns:
        needed.append((extractor.id_column, "--id-field (or --output-id-field)"))
        if extractor.key_column is not None:
            needed.append((extractor.key_column, "--key-field (or --output-key-field)"))
    sink = Sink(f"table:{table}" if table else "query", check_order=check_order)
    for position, row in enumerate(_rows(url, table, query, order_by, needed)):
        try:
            event_id, key = extractor.row(row)
        except ExtractError as error:
            sink.unreadable.append(Unreadable(sink.name, str(error), None, position))
            continue
        sink.records.append(OutputRecord(event_id, key, position, None, False))
    return sink
