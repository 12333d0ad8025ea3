"""What the inbox and the offset store have in common: a table of rows per consumer group."""

from __future__ import annotations

from typing import ClassVar

from onceflow.db import Database


class GroupTable:
    """One consumer group's rows in a table that several groups may share."""

    default_table: ClassVar[str]

    def __init__(self, db: Database, consumer_group: str, table: str | None = None) -> None:
        self.db = db
        self.group = consumer_group
        self.table = table or self.default_table

    def schema(self) -> list[str]:
        """The statements that create the table (and its indexes) if missing."""
        raise NotImplementedError

    def create_table(self, *columns: str) -> str:
        """CREATE TABLE IF NOT EXISTS with a consumer_group column, then ``columns``."""
        listed = ", ".join(("consumer_group TEXT NOT NULL", *columns))
        return f"CREATE TABLE IF NOT EXISTS {self.table} ({listed})"

    def create_schema(self) -> None:
        self.db.script(self.schema())
