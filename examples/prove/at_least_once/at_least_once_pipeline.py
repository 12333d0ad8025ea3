"""BROKEN (process-then-commit, no dedup): the offset is committed after the work
(processing_guarantee = at_least_once) with nothing removing redeliveries. A kill after
the database commit and before the offset commit inserts the batch twice."""

from onceflow.patterns import Record
from onceflow.patterns.runner import Context


def handle(record: Record, ctx: Context) -> None:
    order = record.value
    ctx.tx.execute(
        "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
        (order["id"], order["key"], order["seq"]),
    )
