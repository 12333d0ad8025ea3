"""BROKEN: an idempotent consumer combined with Kafka transactions (seed 003's appendix). Each
order is inserted into SQLite, skipping orders the table has (the deduplication), and the
new ones get an event on order-events in a Kafka transaction that also commits the
offsets. The database commits first: a kill before the Kafka transaction commits aborts
the events and redelivers the batch, whose orders the database has now, so they are
skipped and their events are never published (order-events: missing).

    onceflow prove command --input orders --output table:orders \\
        --output topic:order-events --schema schema.sql --quick -- python broken.py
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
    new_orders = []
    with db:
        for message in messages:
            order = json.loads(message.value())
            if db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"]),
            ).rowcount:
                new_orders.append(order)  # a duplicate was processed already: skip it
    producer.begin_transaction()
    for order in new_orders:
        producer.produce(
            "order-events", json.dumps({**order, "event": "created"}), key=order["key"]
        )
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
