"""What differs between SQLite and PostgreSQL, in one place.

onceflow writes its SQL once, with ``?`` placeholders and the subset both databases share
(``INSERT ... ON CONFLICT DO NOTHING`` / ``DO UPDATE``, ``RETURNING``, partial indexes,
double-quoted identifiers). A ``Dialect`` holds the rest: the statements and the behaviour
that differ. It is a string enum (``Dialect.SQLITE == "sqlite"``), so it pickles to Spark
executors, prints as its name and compares with a name read from a URL.

The differences that matter for exactly-once:

* **Locking.** SQLite has no row locks: a write transaction (``BEGIN IMMEDIATE``) takes the
  database's write lock at its start and serializes every writer (``serializes_writers``).
  PostgreSQL locks rows (``SELECT ... FOR UPDATE``, ``SKIP LOCKED``) and offers advisory
  locks.
* **Timeouts.** A lock timeout is SQLite's busy timeout; PostgreSQL has a lock timeout and a
  statement timeout for the session.
* **Types and bulk loading.** Binary, floating point, temporal types and the clock differ;
  PostgreSQL loads rows with ``COPY FROM STDIN`` and has unlogged tables.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

T = TypeVar("T")


class Dialect(StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"

    def _pick(self, sqlite: T, postgresql: T) -> T:
        return sqlite if self is Dialect.SQLITE else postgresql

    # -- statements ---------------------------------------------------------------------

    def placeholders(self, statement: str) -> str:
        """``statement``'s ``?`` placeholders as the DB-API driver takes them (psycopg:
        ``%s``, with literal ``%`` doubled)."""
        if self is Dialect.SQLITE:
            return statement
        return statement.replace("%", "%%").replace("?", "%s")

    def numbered_placeholders(self, statement: str) -> str:
        """``statement``'s ``?`` placeholders in the server's own syntax (PostgreSQL:
        ``$1, $2, ...``), for drivers that pass the statement through (ADBC)."""
        if self is Dialect.SQLITE:
            return statement
        parts = statement.split("?")
        return parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))

    @property
    def begin(self) -> str:
        """Starts a write transaction: SQLite's ``BEGIN IMMEDIATE`` takes the write lock at
        once, so two writers never interleave inside one."""
        return self._pick("BEGIN IMMEDIATE", "BEGIN")

    @property
    def row_lock(self) -> str:
        """Suffix of a SELECT that locks its rows until the transaction ends (SQLite: none
        needed, the transaction holds the database's write lock)."""
        return self._pick("", " FOR UPDATE")

    @property
    def row_lock_skipping_locked(self) -> str:
        """Suffix of a SELECT that locks its rows and skips those another transaction holds
        (PostgreSQL's work queues; SQLite: none, the writer holds the whole database)."""
        return self._pick("", " FOR UPDATE SKIP LOCKED")

    def session_settings(
        self, lock_timeout_ms: int, statement_timeout_ms: int | None = None
    ) -> list[str]:
        """Statements that bound how long a session waits for a lock and, on PostgreSQL,
        how long a statement may run (None: the server's setting)."""
        if self is Dialect.SQLITE:
            return [f"PRAGMA busy_timeout = {int(lock_timeout_ms)}"]
        settings = [f"SET lock_timeout = {int(lock_timeout_ms)}"]
        if statement_timeout_ms is not None:
            settings.append(f"SET statement_timeout = {int(statement_timeout_ms)}")
        return settings

    def advisory_lock(self, key: str, shared: bool = False) -> str | None:
        """A statement that takes a transaction-scoped advisory lock on ``key`` (an SQL
        bigint expression, e.g. ``?`` or ``hashtext(?)``); None on SQLite, whose write
        transactions already exclude each other. Selects a boolean (drivers that cannot
        read PostgreSQL's ``void`` can run it too)."""
        if self is Dialect.SQLITE:
            return None
        function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        return f"SELECT {function}({key}) IS NULL"

    @property
    def quoted_names_ignore_case(self) -> bool:
        """SQLite matches names without regard to case, quoted or not ("Store" is store);
        PostgreSQL's quoted names are exact."""
        return self is Dialect.SQLITE

    @property
    def insertion_order(self) -> str | None:
        """An ORDER BY expression that reads a table in insertion order: SQLite's rowid
        (for tables that have one); None on PostgreSQL, which keeps no such order."""
        return self._pick("rowid", None)

    @property
    def now_ms(self) -> str:
        """SQL expression for the current time in epoch milliseconds."""
        return self._pick(
            "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
            "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
        )

    # -- tables and types ---------------------------------------------------------------

    @property
    def autoincrement_pk(self) -> str:
        return self._pick(
            "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        )

    @property
    def blob(self) -> str:
        return self._pick("BLOB", "BYTEA")

    @property
    def double(self) -> str:
        return self._pick("REAL", "DOUBLE PRECISION")

    @property
    def timestamp_tz(self) -> str:
        """Column type of an instant (SQLite keeps ISO-8601 text)."""
        return self._pick("TEXT", "TIMESTAMPTZ")

    @property
    def timestamp(self) -> str:
        """Column type of a local date-time (SQLite keeps ISO-8601 text)."""
        return self._pick("TEXT", "TIMESTAMP")

    @property
    def date(self) -> str:
        return self._pick("TEXT", "DATE")

    @property
    def create_scratch_table(self) -> str:
        """CREATE for a table whose rows live a moment: PostgreSQL's UNLOGGED writes no WAL
        for them (a server crash empties it)."""
        return self._pick("CREATE TABLE", "CREATE UNLOGGED TABLE")

    # -- behaviour ----------------------------------------------------------------------

    @property
    def serializes_writers(self) -> bool:
        """A write transaction excludes every other writer of the database (SQLite), as
        opposed to locking rows (PostgreSQL)."""
        return self is Dialect.SQLITE

    @property
    def copies_rows(self) -> bool:
        """Loads rows with ``COPY ... FROM STDIN`` (PostgreSQL)."""
        return self is Dialect.POSTGRESQL

    @property
    def binds_rich_values(self) -> bool:
        """The driver binds decimals, dates and timestamps as they are (psycopg); SQLite's
        are bound as text."""
        return self is Dialect.POSTGRESQL
