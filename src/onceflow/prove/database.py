"""A trial's database, SQLite or PostgreSQL: its schema, its tables' columns and rows.

Read-only except ``apply_schema``; every call opens its own short connection (the
pipeline's processes write meanwhile; a SQLite connection left open keeps the -shm file
mapped under a process that may truncate it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from onceflow.db import DatabaseUrl, quote_identifier
from onceflow.prove.errors import ProveError

PG_COLUMNS = ("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
              "AND table_schema = current_schema() ORDER BY ordinal_position")  # fmt: skip
PG_UNIQUE = """
SELECT count(*) FROM pg_index i
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
WHERE t.relname = %s AND i.indisunique AND i.indnatts = 1 AND a.attname = %s
"""


class TrialDatabase:
    def __init__(self, url: str) -> None:
        self.url = url
        self.parsed = DatabaseUrl.parse(url)

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for PostgreSQL)."""
        return Path(self.parsed.target) if self.parsed.dialect == "sqlite" else None

    @contextmanager
    def _connection(self, read_only: bool = True) -> Iterator[Any]:
        if self.path is not None:
            target = f"file:{self.path}?mode=ro" if read_only else str(self.path)
            with closing(sqlite3.connect(target, uri=read_only, timeout=10)) as db:
                yield db
            return
        import psycopg

        with psycopg.connect(self.parsed.target, autocommit=True, connect_timeout=10) as db:
            yield db

    def apply_schema(self, schema: Path) -> None:
        try:
            script = schema.read_text()
        except OSError as error:
            raise ProveError(f"cannot read the schema {schema}: {error.strerror}") from None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connection(read_only=False) as db:
                if self.path is not None:
                    db.executescript(script)
                else:
                    db.execute(script)
        except Exception as error:  # sqlite3.Error, psycopg.Error: the user's SQL
            raise ProveError(f"{schema}: {error}".strip()) from None

    def columns(self, table: str) -> list[str] | None:
        """The table's columns; None when it (or the database) does not exist."""
        if self.path is not None and not self.path.exists():
            return None
        with self._connection() as db:
            if self.path is not None:
                rows = db.execute(f"PRAGMA table_info({quote_identifier(table)})").fetchall()
                names = [row[1] for row in rows]
            else:
                names = [row[0] for row in db.execute(PG_COLUMNS, (table,)).fetchall()]
        return names or None

    def tables(self) -> list[str]:
        if self.path is not None and not self.path.exists():
            return []
        with self._connection() as db:
            if self.path is not None:
                query = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            else:
                query = ("SELECT table_name FROM information_schema.tables "
                         "WHERE table_schema = current_schema() ORDER BY table_name")  # fmt: skip
            return [row[0] for row in db.execute(query).fetchall()]

    def select(self, table: str, columns: list[str]) -> list[dict[str, Any]]:
        selected = ", ".join(quote_identifier(column) for column in columns)
        with self._connection() as db:
            rows = db.execute(f"SELECT {selected} FROM {quote_identifier(table)}").fetchall()
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def unique_on(self, table: str, column: str) -> bool:
        """Is ``column`` alone a primary key or unique index of ``table``? (True when it
        cannot tell: the hint this serves says nothing then.)"""
        try:
            with self._connection() as db:
                if self.path is None:
                    return bool(db.execute(PG_UNIQUE, (table, column)).fetchone()[0])
                quoted = quote_identifier(table)
                for row in db.execute(f"PRAGMA table_info({quoted})"):
                    if row[1] == column and row[5]:
                        return True
                for index in db.execute(f"PRAGMA index_list({quoted})").fetchall():
                    if index[2]:
                        info = f"PRAGMA index_info({quote_identifier(index[1])})"
                        if [r[2] for r in db.execute(info)] == [column]:
                            return True
        except Exception:  # sqlite3.Error, psycopg.Error
            return True
        return False
