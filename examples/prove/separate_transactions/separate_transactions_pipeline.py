"""BROKEN (DB write and offset commit in separate transactions): the handler writes the
order with a connection of its own and commits it at once; the Runner stores the offset
in its own transaction later (pattern db_offsets). A kill in between keeps the order and
loses the offset: the batch is processed again. `onceflow prove` finds duplicates."""

import os
import sqlite3

from onceflow.patterns import Record
from onceflow.patterns.runner import Context

_connection: sqlite3.Connection | None = None


def handle(record: Record, ctx: Context) -> None:
    global _connection
    if _connection is None:
        _connection = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30)
    order = record.value
    with _connection:  # its own transaction, committed here
        _connection.execute(
            "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
            (order["id"], order["key"], order["seq"]),
        )
