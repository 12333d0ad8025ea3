"""BROKEN: enable.auto.commit left at its default (true). The client commits the offsets of
what consume() returned every 5 s in the background, whatever became of those records: a
kill redoes everything since the last auto-commit (duplicated), and a kill right after an
auto-commit that ran before the batch's rows were written loses it.

    onceflow prove command --input orders --output table:orders --schema broken.sql \\
        --quick -- python broken.py
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
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
