"""BROKEN plain consumer keeping running totals with confluent-kafka's default
enable.auto.commit=true: a kill redoes everything after the last auto-commit, and each
redone order is added to its store's total a second time (no duplicate rows to see:
only the totals are wrong).

    onceflow prove command --input orders --output table:store_totals --schema schema.sql \\
        --generator store_orders:order --expect store_orders:totals --id-field order_id \\
        --key-field store -- python totals_auto_commit_consumer.py
"""

import json
import os
import sqlite3

from confluent_kafka import Consumer, TopicPartition

topic = os.environ["ONCEFLOW_INPUT_TOPIC"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"])
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "totals-auto-commit",
        "enable.auto.commit": True,  # the default, spelled out
        "auto.offset.reset": "earliest",
    }
)
partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])

while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO store_totals (store, revenue, orders) VALUES (?, ?, 1) "
                "ON CONFLICT (store) DO UPDATE SET revenue = revenue + excluded.revenue, "
                "orders = orders + 1",
                (order["store"], order["amount"]),
            )
