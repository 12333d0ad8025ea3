"""FIXED: process, then commit, and a redelivery changes nothing. The rows are written
first and the offsets committed after them, so a kill redelivers the batch instead of
losing it; the order id is the table's primary key and the insert skips an order it has,
so the redelivered batch is not written twice.

    onceflow prove command --input orders --output table:orders --schema fixed.sql \\
        --quick -- python fixed.py
"""

import json
import os
import sqlite3

from confluent_kafka import Consumer

db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"])
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"]),
            )
    consumer.commit(asynchronous=False)
