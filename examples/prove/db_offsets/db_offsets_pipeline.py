"""Correct: the order row and the partition's offset commit in one database transaction
(pattern db_offsets). `onceflow prove` says: exactly-once held."""

from onceflow.patterns import Record
from onceflow.patterns.runner import Context


def handle(record: Record, ctx: Context) -> None:
    order = record.value
    ctx.tx.execute(
        "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
        (order["id"], order["key"], order["seq"]),
    )
