"""A thin database layer: SQLite (stdlib, the embedded default) and PostgreSQL (psycopg 3).

One ``Database`` is one connection used by one thread. SQL is written once with ``?``
placeholders and the subset both databases share; what differs is the ``Dialect``
(``onceflow.sql_dialect``, ``db.dialect``), which also adapts the placeholders. This module
holds what differs between the two drivers (sqlite3 and psycopg): connecting, their errors.

Transactions:

* ``transaction()`` on SQLite is ``BEGIN IMMEDIATE``: the database write lock is taken at
  the start, so two workers never interleave inside one (SQLite has no row locks).
* On PostgreSQL it is a plain ``BEGIN``; row locks are taken explicitly with
  ``SELECT ... FOR UPDATE`` (``dialect.row_lock``) by the patterns that need them.

Both use a lock timeout and a statement timeout (milliseconds); the Runner keeps them below
the consumer's ``max.poll.interval.ms`` (``RunnerConfig.validate``), so a worker blocked
behind a dead owner's lock gives up before the group evicts it (the Karafka article's
first rule).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

from onceflow.configuration_error import ConfigurationError
from onceflow.sql_dialect import Dialect

Params = Sequence[Any]

DEFAULT_LOCK_TIMEOUT_MS = 10_000
DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
SCHEMA_LOCK_KEY = 0x6F6E6365  # "once": advisory lock serializing schema creation


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (SQLite and PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


class DatabaseError(RuntimeError):
    """A database operation failed (the message names the database and the statement)."""


class LockTimeout(DatabaseError):
    """A row or database lock was not granted within the lock timeout."""


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    dialect: Dialect
    target: str  # a file path for SQLite, a libpq URL for PostgreSQL

    @classmethod
    def parse(cls, url: str) -> DatabaseUrl:
        if url.startswith("sqlite:///"):
            path = url[len("sqlite:///") :]
            if not path:
                raise ConfigurationError("sqlite URL needs a path: sqlite:///path/to/file.db")
            return cls(Dialect.SQLITE, path)
        if url == "sqlite://" or url == "sqlite:///:memory:":
            return cls(Dialect.SQLITE, ":memory:")
        scheme, sep, rest = url.partition("://")
        if sep and scheme.split("+")[0] in ("postgresql", "postgres"):
            return cls(Dialect.POSTGRESQL, f"postgresql://{rest}")
        raise ConfigurationError(
            f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://..."
        )


class Transaction:
    """A running transaction; ``execute`` returns a cursor (rows as tuples)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.dialect = database.dialect

    def execute(self, sql: str, params: Params = ()) -> Any:
        return self.database.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        self.database.executemany(sql, rows)

    def fetchone(self, sql: str, params: Params = ()) -> tuple | None:
        return self.execute(sql, params).fetchone()

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple]:
        return list(self.execute(sql, params).fetchall())


class Database:
    """One connection to SQLite or PostgreSQL with explicit transactions."""

    def __init__(
        self,
        url: str,
        *,
        lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
    ) -> None:
        self.url = url
        self._parsed = DatabaseUrl.parse(url)
        self.dialect: Dialect = self._parsed.dialect
        self.lock_timeout_ms = lock_timeout_ms
        self.statement_timeout_ms = statement_timeout_ms
        self._in_transaction = False
        if self.dialect is Dialect.SQLITE:
            self._conn: Any = self._connect_sqlite()
        else:
            self._conn = self._connect_postgresql()

    # -- connection -------------------------------------------------------------------

    def _connect_sqlite(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._parsed.target,
            timeout=self.lock_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,
        )
        self._apply_session_settings(conn)
        if self._parsed.target != ":memory:":
            self._enable_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs an exclusive lock, and SQLite answers "database is locked"
        # at once, without its busy handler, while another process opens or recovers the
        # file (e.g. after a SIGKILL): retry until the lock timeout.
        deadline = time.monotonic() + self.lock_timeout_ms / 1000
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _connect_postgresql(self) -> Any:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - optional dependency
            raise ConfigurationError(
                "PostgreSQL needs psycopg 3: pip install 'onceflow[postgres]'"
            ) from None
        try:
            conn = psycopg.connect(self._parsed.target, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            raise DatabaseError(f"cannot connect to {self._redacted()}: {error}") from None
        self._apply_session_settings(conn)
        return conn

    def _apply_session_settings(self, conn: Any) -> None:
        for statement in self.dialect.session_settings(
            self.lock_timeout_ms, self.statement_timeout_ms
        ):
            conn.execute(statement)

    def _redacted(self) -> str:
        scheme, _, rest = self.url.partition("://")
        if "@" in rest:
            rest = "***@" + rest.split("@", 1)[1]
        return f"{scheme}://{rest}"

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # closing a broken connection must not mask the real error
            pass

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- statements -------------------------------------------------------------------

    def _translate(self, error: Exception, statement: str) -> DatabaseError:
        text = str(error).strip()
        short = " ".join(statement.split())[:120]
        if self.dialect is Dialect.SQLITE:
            if "locked" in text or "busy" in text:
                return LockTimeout(f"SQLite lock not granted in {self.lock_timeout_ms} ms: {text}")
        else:
            import psycopg.errors as pg_errors

            if isinstance(error, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
                return LockTimeout(f"PostgreSQL lock/statement timeout: {text} [{short}]")
        return DatabaseError(f"{self.dialect}: {text} [{short}]")

    def _errors(self) -> tuple[type[BaseException], ...]:
        if self.dialect is Dialect.SQLITE:
            return (sqlite3.Error,)
        import psycopg

        return (psycopg.Error,)

    def execute(self, statement: str, params: Params = ()) -> Any:
        try:
            return self._conn.execute(self.dialect.placeholders(statement), tuple(params))
        except self._errors() as error:
            raise self._translate(error, statement) from error

    def executemany(self, statement: str, rows: Sequence[Params]) -> None:
        if not rows:
            return
        try:
            with closing(self._conn.cursor()) as cursor:
                cursor.executemany(self.dialect.placeholders(statement), rows)
        except self._errors() as error:
            raise self._translate(error, statement) from error

    def copy_rows(self, statement: str, rows: Iterable[Params]) -> None:
        """PostgreSQL ``COPY ... FROM STDIN`` of ``rows`` (several times faster than
        ``executemany``); inside ``transaction()`` it is part of the transaction."""
        if not self.dialect.copies_rows:
            raise DatabaseError(f"COPY is not available on {self.dialect}")
        try:
            with self._conn.cursor() as cursor, cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)
        except self._errors() as error:
            raise self._translate(error, statement) from error

    def script(self, statements: Sequence[str]) -> None:
        """Run DDL statements in one transaction (idempotent ``CREATE ... IF NOT EXISTS``).

        Concurrent ``CREATE TABLE IF NOT EXISTS`` races on PostgreSQL (a unique violation
        in pg_type), so workers starting together serialize on an advisory lock; SQLite's
        BEGIN IMMEDIATE already does.
        """
        lock = self.dialect.advisory_lock("?")
        with self.transaction() as tx:
            if lock is not None:
                tx.execute(lock, (SCHEMA_LOCK_KEY,))
            for statement in statements:
                tx.execute(statement)

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """BEGIN (IMMEDIATE on SQLite) ... COMMIT, or ROLLBACK when the block raises."""
        if self._in_transaction:
            raise DatabaseError("nested transactions are not supported")
        self._begin(self.dialect.begin)
        self._in_transaction = True
        try:
            yield Transaction(self)
        except BaseException:
            self._rollback()
            raise
        else:
            self._commit()
        finally:
            self._in_transaction = False

    def _begin(self, begin: str) -> None:
        # SQLite's busy handler does not always apply to BEGIN IMMEDIATE under WAL when a
        # checkpoint is running; retry until the lock timeout like the busy handler would.
        deadline = time.monotonic() + self.lock_timeout_ms / 1000
        while True:
            try:
                self._conn.execute(begin)
                return
            except self._errors() as error:
                translated = self._translate(error, begin)
                if isinstance(translated, LockTimeout) and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise translated from error

    def _commit(self) -> None:
        try:
            self._conn.execute("COMMIT")
        except self._errors() as error:
            self._rollback()
            raise self._translate(error, "COMMIT") from error

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except Exception:  # the transaction may already be gone (connection lost)
            pass

    @property
    def autoincrement_pk(self) -> str:
        # Read here by chaos/flows.py, which others are changing now; new code uses
        # db.dialect.autoincrement_pk. Remove once that line reads the dialect.
        return self.dialect.autoincrement_pk


def connect(
    url: str,
    *,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
) -> Database:
    """Open a database (``sqlite:///PATH`` or ``postgresql://...``)."""
    return Database(url, lock_timeout_ms=lock_timeout_ms, statement_timeout_ms=statement_timeout_ms)
