"""A database of its own for every chaos cell or proof trial, and a way to make one
unavailable.

SQLite (default): one file per name in the work directory. PostgreSQL: given a server
URL, one database per name, created on that server (``CREATE DATABASE``) and dropped by
``drop_all()``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from onceflow.db import DatabaseUrl


class CellDatabases:
    def __init__(self, work: Path, server_url: str | None = None, prefix: str = "chaos") -> None:
        self.work = work
        self.server_url = server_url
        self.prefix = prefix
        self._created: list[str] = []
        self._lock = threading.Lock()

    @property
    def dialect(self) -> str:
        return "sqlite" if self.server_url is None else "postgresql"

    def create(self, name: str, file_name: str = "app.db") -> str:
        """The URL of a new, empty database for ``name`` (SQLite: ``<name>/<file_name>``)."""
        if self.server_url is None:
            return f"sqlite:///{self.work / name / file_name}"
        import psycopg

        cleaned = "".join(c if c.isalnum() else "_" for c in name.lower())
        database = f"{self.prefix}_{cleaned}"[:63]
        target = DatabaseUrl.parse(self.server_url).target
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
            admin.execute(f'CREATE DATABASE "{database}"')
        with self._lock:
            self._created.append(database)
        return urlsplit(target)._replace(path=f"/{database}").geturl()

    def drop_all(self) -> None:
        if self.server_url is None or not self._created:
            return
        import psycopg

        with psycopg.connect(DatabaseUrl.parse(self.server_url).target, autocommit=True) as admin:
            for database in self._created:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        self._created.clear()


@contextmanager
def hold_unavailable(database_url: str, table: str) -> Iterator[None]:
    """Refuse every write to ``table`` (SQLite: the whole file) while the block runs."""
    parsed = DatabaseUrl.parse(database_url)
    if parsed.dialect == "sqlite":
        connection = sqlite3.connect(parsed.target, isolation_level=None, timeout=30)
        try:
            connection.execute("BEGIN EXCLUSIVE")
            yield
            connection.execute("ROLLBACK")
        finally:
            connection.close()
        return
    import psycopg

    with psycopg.connect(parsed.target) as connection:
        connection.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        yield
        connection.rollback()
