"""Producing with confluent-kafka, whose local queue can be full for a moment."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer


def produce_waiting(producer: Producer, topic: str, **fields: Any) -> None:
    """``producer.produce(topic, **fields)``; while the local queue is full, serve delivery
    callbacks and try again."""
    while True:
        try:
            producer.produce(topic, **fields)
            return
        except BufferError:
            producer.poll(0.05)
