"""BROKEN (commit-then-process): the offset is committed before the handler runs
(processing_guarantee = at_most_once). A kill after the commit and before the database
commit loses the batch. `onceflow prove` finds missing events."""

from onceflow.patterns import Record
from onceflow.patterns.runner import Context


def handle(record: Record, ctx: Context) -> None:
    order = record.value
    ctx.tx.execute(
        "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
        (order["id"], order["key"], order["seq"]),
    )
