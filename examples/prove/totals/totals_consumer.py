"""Correct plain consumer keeping running totals: each batch adds to the stores' rows and
stores the next offsets in the same SQLite transaction, read back on start.

    onceflow prove command --input orders --output table:store_totals --schema schema.sql \\
        --generator store_orders:order --expect store_orders:totals --id-field order_id \\
        --key-field store -- python totals_consumer.py
"""

import json
import os
import sqlite3

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

topic = os.environ["ONCEFLOW_INPUT_TOPIC"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS offsets (partition INTEGER PRIMARY KEY, next INTEGER)")
stored = dict(db.execute("SELECT partition, next FROM offsets"))

consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "totals",  # never commits to Kafka: SQLite holds the offsets
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
)
partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
consumer.assign(
    [TopicPartition(topic, p, stored.get(p, OFFSET_BEGINNING)) for p in sorted(partitions)]
)

while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    if not messages:
        continue
    db.execute("BEGIN IMMEDIATE")
    for message in messages:
        order = json.loads(message.value())
        db.execute(
            "INSERT INTO store_totals (store, revenue, orders) VALUES (?, ?, 1) "
            "ON CONFLICT (store) DO UPDATE SET revenue = revenue + excluded.revenue, "
            "orders = orders + 1",
            (order["store"], order["amount"]),
        )
        db.execute(
            "INSERT INTO offsets (partition, next) VALUES (?, ?) "
            "ON CONFLICT (partition) DO UPDATE SET next = excluded.next",
            (message.partition(), message.offset() + 1),
        )
    db.execute("COMMIT")  # totals and offsets together: a kill keeps both or neither
