"""BROKEN: commit, then process. The batch's offsets are committed to Kafka first ("we have
taken it"), then the rows are written: a kill after the commit and before the database
commit loses the batch (missing).

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
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    consumer.commit(asynchronous=False)
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
