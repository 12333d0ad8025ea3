"""FIXED: the database decides, atomically. The order id is the table's primary key and the
insert skips an order the table has (INSERT ... ON CONFLICT DO NOTHING): a redelivery and
two workers inserting the same order at once both leave one row.

    onceflow prove command --input orders --output table:orders --schema fixed.sql \\
        --workers 2 --faults pause --quick -- python fixed.py
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


def fraud_score(order):
    """The fraud check: a call of about 10 ms to another service."""
    time.sleep(0.01)
    return order["seq"] % 7


while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    for message in messages:
        order = json.loads(message.value())
        score = fraud_score(order)
        with db:  # the check and the insert in one statement, on the primary key
            db.execute(
                "INSERT INTO orders (id, key, seq, score) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"], score),
            )
    if messages:
        consumer.commit(asynchronous=False)
