"""BROKEN plain consumer: rows committed to SQLite, then the offsets committed to Kafka:
two transactions. A kill between the database commit and the offset commit processes
the batch again (duplicates). The window is short, which is why kills on a timer miss
it and kills timed by output growth find it.

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        -- python commit_after_db_consumer.py
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
        "group.id": "commit-after-db",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
committed = consumer.committed([TopicPartition(topic, p) for p in sorted(partitions)], 30)
consumer.assign(committed)

while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    if not messages:
        continue
    with db:  # transaction 1: the rows
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
    consumer.commit(asynchronous=False)  # transaction 2: the offsets
