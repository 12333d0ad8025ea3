"""BROKEN: an outbox relay without deduplication. The consumer writes each new order and its
event into the outbox in one database transaction (correct); a relay thread publishes the
outbox to order-events, waits for the acknowledgements, then marks the rows published in
a separate step. A kill after the publish and before the mark publishes the rows again
(order-events: duplicated).

    onceflow prove command --input orders --output table:orders \\
        --output topic:order-events --schema schema.sql --quick -- python broken.py
"""

import json
import os
import sqlite3
import threading
import time

from confluent_kafka import Consumer, Producer

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
database_path = os.environ["ONCEFLOW_DATABASE_PATH"]


def relay():
    """Publish the outbox, oldest first, and mark what was published."""
    db = sqlite3.connect(database_path, timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    while True:
        rows = db.execute(
            "SELECT id, topic, key, payload FROM outbox WHERE published_at IS NULL "
            "ORDER BY id LIMIT 100"
        ).fetchall()
        if not rows:
            time.sleep(0.1)
            continue
        for _, topic, key, payload in rows:
            producer.produce(topic, payload, key=key)
        producer.flush()
        with db:
            db.executemany(
                "UPDATE outbox SET published_at = CURRENT_TIMESTAMP WHERE id = ?",
                [(row[0],) for row in rows],
            )


def consume():
    """Orders in, each new one with its event in the outbox, in one transaction."""
    db = sqlite3.connect(database_path, timeout=30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
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
                new = db.execute(
                    "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) "
                    "ON CONFLICT (id) DO NOTHING",
                    (order["id"], order["key"], order["seq"]),
                ).rowcount
                if new:
                    db.execute(
                        "INSERT INTO outbox (topic, key, payload) VALUES (?, ?, ?)",
                        ("order-events", order["key"], json.dumps({**order, "event": "created"})),
                    )
        consumer.commit(asynchronous=False)


threading.Thread(target=relay, daemon=True).start()
consume()
