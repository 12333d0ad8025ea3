"""FIXED: process, then commit, with an idempotent consumer (an inbox). The event's id is
inserted into processed_events in the same database transaction as its rows; an event
whose id is there already was processed before a kill and is skipped when it is
delivered again.

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
            first_time = db.execute(
                "INSERT INTO processed_events (event_id) VALUES (?) ON CONFLICT DO NOTHING",
                (order["id"],),
            ).rowcount
            if not first_time:
                continue  # processed before a crash: its rows are in the table already
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
    consumer.commit(asynchronous=False)
