"""Correct: consume-transform-produce in Kafka transactions; the output and the consumed
offsets commit together (pattern kafka_transactions). `onceflow prove` says: held."""

import json

from onceflow.patterns import Record
from onceflow.patterns.runner import Context


def handle(record: Record, ctx: Context) -> None:
    ctx.produce("order-events", json.dumps(record.value).encode(), key=record.key)
