"""Producing with confluent-kafka, whose local queue can be full for a moment."""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaException, Producer

log = logging.getLogger(__name__)

# abort_transaction() purges the queued records once, then waits for those in flight. A
# record whose request fails after that purge (its connection died) goes back into a
# queue that an aborting producer never sends from, so that call can only time out
# (a retriable error); the next call purges it. Each call is therefore short.
ABORT_ATTEMPT_S = 5.0


def produce_waiting(producer: Producer, topic: str, **fields: Any) -> None:
    """``producer.produce(topic, **fields)``; while the local queue is full, serve delivery
    callbacks and try again."""
    while True:
        try:
            producer.produce(topic, **fields)
            return
        except BufferError:
            producer.poll(0.05)


def abort_transaction(producer: Producer, timeout_s: float) -> None:
    """``producer.abort_transaction``, called again on retriable errors until
    ``timeout_s`` has passed (as librdkafka asks of its callers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        producer.poll(0)  # serve the delivery reports that already arrived
        remaining = deadline - time.monotonic()
        try:
            producer.abort_transaction(max(min(ABORT_ATTEMPT_S, remaining), 0.1))
            return
        except KafkaException as error:
            if not error.args[0].retriable() or time.monotonic() >= deadline:
                raise
            log.info("abort_transaction will be called again: %s", error.args[0].str())
