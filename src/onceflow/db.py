"""A thin database layer: SQLite (stdlib, the embedded default) and PostgreSQL (psycopg 3).

One ``Database`` is one connection used by one thread. SQL is written once with ``?``
placeholders and the ANSI/SQLite-PostgreSQL common subset (``INSERT ... ON CONFLICT``,
partial indexes); ``Database.sql`` adapts the placeholders for PostgreSQL.

Transactions:

* ``transaction()`` on SQLite is ``BEGIN IMMEDIATE``: the database write lock is taken at
  the start, so two workers never interleave inside one (SQLite has no row locks).
* On PostgreSQL it is a plain ``BEGIN``; row locks are taken explicitly with
  ``SELECT ... FOR UPDATE`` (``lock_clause``) by the patterns that need them.

Both use a lock timeout and a statement timeout (milliseconds) that callers keep below the
consumer's ``max.poll.interval.ms``, so a worker blocked behind a dead owner's lock gives up
before the group evicts it (the Karafka article's first rule).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

Dialect = Literal["sqlite", "postgresql"]
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


class ConfigurationError(ValueError):
    """A pattern or runner was configured in a way that cannot work (or is unsafe)."""


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
            return cls("sqlite", path)
        if url == "sqlite://" or url == "sqlite:///:memory:":
            return cls("sqlite", ":memory:")
        scheme, sep, rest = url.partition("://")
        if sep and scheme.split("+")[0] in ("postgresql", "postgres"):
            return cls("postgresql", f"postgresql://{rest}")
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
        if self.dialect == "sqlite":
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
        conn.execute(f"PRAGMA busy_timeout = {int(self.lock_timeout_ms)}")
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
        conn.execute(f"SET lock_timeout = {int(self.lock_timeout_ms)}")
        conn.execute(f"SET statement_timeout = {int(self.statement_timeout_ms)}")
        return conn

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

    def sql(self, statement: str) -> str:
        """Adapt ``?`` placeholders to the driver (``%s`` for psycopg)."""
        if self.dialect == "postgresql":
            return statement.replace("%", "%%").replace("?", "%s")
        return statement

    def _translate(self, error: Exception, statement: str) -> DatabaseError:
        text = str(error).strip()
        short = " ".join(statement.split())[:120]
        if self.dialect == "sqlite":
            if "locked" in text or "busy" in text:
                return LockTimeout(f"SQLite lock not granted in {self.lock_timeout_ms} ms: {text}")
        else:
            import psycopg.errors as pg_errors

            if isinstance(error, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
                return LockTimeout(f"PostgreSQL lock/statement timeout: {text} [{short}]")
        return DatabaseError(f"{self.dialect}: {text} [{short}]")

    def _errors(self) -> tuple[type[BaseException], ...]:
        if self.dialect == "sqlite":
            return (sqlite3.Error,)
        import psycopg

        return (psycopg.Error,)

    def execute(self, statement: str, params: Params = ()) -> Any:
        try:
            return self._conn.execute(self.sql(statement), tuple(params))
        except self._errors() as error:
            raise self._translate(error, statement) from error

    def executemany(self, statement: str, rows: Sequence[Params]) -> None:
        if not rows:
            return
        try:
            if self.dialect == "sqlite":
                self._conn.executemany(statement, rows)
            else:
                with self._conn.cursor() as cursor:
                    cursor.executemany(self.sql(statement), rows)
        except self._errors() as error:
            raise self._translate(error, statement) from error

    def copy_rows(self, statement: str, rows: Iterable[Params]) -> None:
        """PostgreSQL ``COPY ... FROM STDIN`` of ``rows`` (several times faster than
        ``executemany``); inside ``transaction()`` it is part of the transaction."""
        if self.dialect != "postgresql":
            raise DatabaseError("COPY is only available on PostgreSQL")
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
        with self.transaction() as tx:
            if self.dialect == "postgresql":
                tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,))
            for statement in statements:
                tx.execute(statement)

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """BEGIN (IMMEDIATE on SQLite) ... COMMIT, or ROLLBACK when the block raises."""
        if self._in_transaction:
            raise DatabaseError("nested transactions are not supported")
        begin = "BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN"
        self._begin(begin)
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

    # -- dialect helpers --------------------------------------------------------------

    @property
    def lock_clause(self) -> str:
        """Row-lock suffix for SELECT: FOR UPDATE on PostgreSQL (SQLite: BEGIN IMMEDIATE)."""
        return " FOR UPDATE" if self.dialect == "postgresql" else ""

    @property
    def autoincrement_pk(self) -> str:
        if self.dialect == "postgresql":
            return "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        return "INTEGER PRIMARY KEY AUTOINCREMENT"

    @property
    def blob(self) -> str:
        return "BYTEA" if self.dialect == "postgresql" else "BLOB"

    @property
    def now_ms(self) -> str:
        """SQL expression for the current time in epoch milliseconds."""
        if self.dialect == "postgresql":
            return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
        return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"


def connect(
    url: str,
    *,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
    max_poll_interval_ms: int | None = None,
) -> Database:
    """Open a database; with ``max_poll_interval_ms`` the timeouts are checked against it."""
    if max_poll_interval_ms is not None:
        for name, value in (
            ("lock_timeout_ms", lock_timeout_ms),
            ("statement_timeout_ms", statement_timeout_ms),
        ):
            if value >= max_poll_interval_ms:
                raise ConfigurationError(
                    f"{name}={value} must be below max.poll.interval.ms={max_poll_interval_ms}"
                    " or a worker blocked on a lock is evicted from its group in a loop"
                )
    return Database(url, lock_timeout_ms=lock_timeout_ms, statement_timeout_ms=statement_timeout_ms)
