"""BROKEN (Kafka producer outside the transaction): the handler sends with a producer of
its own instead of ctx.produce. Its records are not part of the Runner's Kafka
transaction, so when a kill aborts the transaction they stay, and the redelivered batch
sends them again: duplicates even for read_committed consumers."""

import json
import os

from confluent_kafka import Producer

from onceflow.patterns import Record
from onceflow.patterns.runner import Context

_producer: Producer | None = None


def handle(record: Record, ctx: Context) -> None:
    global _producer
    if _producer is None:
        _producer = Producer(
            {"bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"], "enable.idempotence": True}
        )
    _producer.produce("order-events", json.dumps(record.value).encode(), key=record.key)
    _producer.flush(10)
