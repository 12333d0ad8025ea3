"""BROKEN: the offsets are kept in the database, but committed in a transaction of their own
after the rows' transaction. A kill between the two commits leaves the rows and the old
offsets: the batch is read again from the old offsets and inserted twice (duplicated).

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        --quick -- python broken.py
"""

import json
import os
import sqlite3

from confluent_kafka import Consumer

topic = os.environ["ONCEFLOW_INPUT_TOPIC"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"])


def on_assign(consumer, partitions):
    """Start each partition at the offset the database holds (the beginning if none)."""
    stored = dict(
        db.execute("SELECT partition, next_offset FROM kafka_offsets WHERE topic = ?", (topic,))
    )
    for partition in partitions:
        if partition.partition in stored:
            partition.offset = stored[partition.partition]
    consumer.assign(partitions)


def save_orders(messages):
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )


def save_offsets(messages):
    with db:
        for message in messages:
            db.execute(
                "INSERT INTO kafka_offsets (topic, partition, next_offset) VALUES (?, ?, ?) "
                "ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                (message.topic(), message.partition(), message.offset() + 1),
            )


consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([topic], on_assign=on_assign)

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if messages:
        save_orders(messages)
        save_offsets(messages)
