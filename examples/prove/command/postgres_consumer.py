"""A plain consumer writing to PostgreSQL (psycopg 3), subscribe() with Kafka's defaults.

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        --database-url postgresql://USER@HOST:PORT/DB --quick \\
        -- python postgres_consumer.py [--fixed]

It reads $ONCEFLOW_DATABASE_URL (a fresh database per trial). Broken: the rows committed,
then the offsets committed to Kafka. Fixed (--fixed): the next offsets kept in the rows'
transaction, and sought to on every assignment.
"""

import argparse
import json
import os

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
args = parser.parse_args()

db = psycopg.connect(os.environ["ONCEFLOW_DATABASE_URL"])
with db.transaction():
    db.execute("CREATE TABLE IF NOT EXISTS offsets (part INTEGER PRIMARY KEY, next BIGINT)")
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders-to-postgres",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)


def on_assign(consumer, partitions):
    if args.fixed:
        with db.transaction():
            stored = dict(db.execute("SELECT part, next FROM offsets").fetchall())
        consumer.assign(
            [
                TopicPartition(tp.topic, tp.partition, stored.get(tp.partition, OFFSET_BEGINNING))
                for tp in partitions
            ]
        )


consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]], on_assign=on_assign)
while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    if not messages:
        continue
    with db.transaction():
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (%s, %s, %s)",
                (order["id"], order["key"], order["seq"]),
            )
            if args.fixed:
                db.execute(
                    "INSERT INTO offsets VALUES (%s, %s) ON CONFLICT (part) DO UPDATE "
                    "SET next = excluded.next",
                    (message.partition(), message.offset() + 1),
                )
    if not args.fixed:
        consumer.commit(asynchronous=False)
