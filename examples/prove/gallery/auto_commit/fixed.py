"""FIXED: auto-commit kept, but it commits only what was processed, and a redelivery changes
nothing. With enable.auto.offset.store=false the background commit sends only offsets the
code stored with store_offsets(), after the row's transaction; what it redelivers after a
kill is skipped by the primary key on the order id.

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
        "auto.offset.reset": "earliest",
        "enable.auto.offset.store": False,
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    for message in consumer.consume(100, timeout=1.0):
        if message.error():
            continue
        order = json.loads(message.value())
        with db:
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"]),
            )
        consumer.store_offsets(message)
