"""BROKEN plain consumer: confluent-kafka's default enable.auto.commit=true. Offsets are
committed in the background every auto.commit.interval.ms, whatever happened to the rows
written since: a kill redoes everything after the last auto-commit (duplicates).

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        -- python auto_commit_consumer.py
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
        "group.id": "auto-commit",
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
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
