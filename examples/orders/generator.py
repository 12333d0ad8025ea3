"""The orders stream: JSON orders keyed by store, written by an idempotent producer."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable

from confluent_kafka import Producer

STORES = [f"store-{number:02d}" for number in range(24)]


def order(number: int, rng: random.Random) -> tuple[str, dict]:
    store = rng.choice(STORES)
    return store, {
        "order_id": f"o-{number:07d}",
        "store": store,
        "amount": rng.randint(1, 500),
        "ts": int(time.time() * 1000),
    }


def generate(
    bootstrap: str,
    topic: str,
    count: int,
    rate: float,
    seed: int = 42,
    progress: Callable[[int], None] | None = None,
    logger: logging.Logger | None = None,
) -> None:
    """Produce ``count`` orders at about ``rate`` per second (keys keep a store's order);
    ``logger`` gets librdkafka's log lines (default: stderr)."""
    rng = random.Random(seed)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "partitioner": "murmur2_random",  # Java-compatible key placement
        },
        **({"logger": logger} if logger is not None else {}),
    )
    started = time.monotonic()
    for number in range(count):
        store, value = order(number, rng)
        producer.produce(topic, key=store.encode(), value=json.dumps(value).encode())
        if number % 500 == 0:
            producer.poll(0)
            if progress is not None:
                progress(number)
            ahead = number / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    if producer.flush(60) != 0:
        raise RuntimeError("orders were not all acknowledged by the broker")
    if progress is not None:
        progress(count)
