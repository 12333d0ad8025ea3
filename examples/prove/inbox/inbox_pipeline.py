"""Correct: the order row and the event id commit in one database transaction (pattern
inbox: a redelivered event's id is already claimed, so it is skipped). `onceflow prove`
says: exactly-once held."""

from onceflow.patterns import Record
from onceflow.patterns.runner import Context


def handle(record: Record, ctx: Context) -> None:
    order = record.value
    ctx.tx.execute(
        "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
        (order["id"], order["key"], order["seq"]),
    )
