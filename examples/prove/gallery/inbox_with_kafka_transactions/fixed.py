"""FIXED: the database write is idempotent, the event is not skipped. Each order is inserted
into SQLite, skipping orders the table has, and every order of the batch, new or
delivered again, gets its event in the Kafka transaction that commits the offsets. A
redelivered batch is one whose transaction was aborted, so its events were never
visible: publishing them again publishes them once.

    onceflow prove command --input orders --output table:orders \\
        --output topic:order-events --schema schema.sql --quick -- python fixed.py
"""

import json
import os
import sqlite3

from confluent_kafka import Consumer, Producer

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"])
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "orders"})
producer.init_transactions()
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    orders = [json.loads(message.value()) for message in messages]
    with db:
        for order in orders:
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"]),
            )
    producer.begin_transaction()
    for order in orders:
        producer.produce(
            "order-events", json.dumps({**order, "event": "created"}), key=order["key"]
        )
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
