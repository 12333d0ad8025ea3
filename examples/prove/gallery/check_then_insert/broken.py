"""BROKEN: "exactly-once" by looking first. Before inserting an order the consumer SELECTs it
and skips it if it is there, then commits the offsets after the batch: a redelivery after
a kill is skipped, but the check and the insert are not atomic (no unique key; the
SELECT runs outside the insert's transaction), so two workers handling the same orders
at the same time (the old owner of a partition still finishing its batch after a
rebalance gave the partition to the other) both find nothing and both insert (duplicated).
Run as a group of two, with a worker now and then paused (a long GC pause, a frozen VM:
its partitions move to the other, and it goes on with what it has read when it wakes):

    onceflow prove command --input orders --output table:orders --schema broken.sql \\
        --workers 2 --faults pause --quick -- python broken.py
"""

import json
import os
import sqlite3
import time

from confluent_kafka import Consumer

db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30)
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])


def seen(order_id):
    return db.execute("SELECT 1 FROM orders WHERE id = ?", (order_id,)).fetchone() is not None


def fraud_score(order):
    """The fraud check: a call of about 10 ms to another service."""
    time.sleep(0.01)
    return order["seq"] % 7


while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    for message in messages:
        order = json.loads(message.value())
        if seen(order["id"]):
            continue  # processed before a crash
        score = fraud_score(order)
        with db:
            db.execute(
                "INSERT INTO orders (id, key, seq, score) VALUES (?, ?, ?, ?)",
                (order["id"], order["key"], order["seq"], score),
            )
    if messages:
        consumer.commit(asynchronous=False)
