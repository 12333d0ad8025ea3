"""The most ordinary consumer there is: confluent-kafka, subscribe() with a group id and
Kafka's defaults, rows into SQLite.

    onceflow prove command --input orders --output table:orders --quick --seed 11 \\
        -- python subscribe_consumer.py --mode broken --input '{input_topic}' --db '{database_path}'

``--mode broken`` commits the offsets to Kafka right after the database commit: two
transactions, and a death between them processes the batch again (duplicates).
``--mode fixed`` keeps the next offsets in the rows' transaction and seeks to them
whenever it is assigned partitions.
"""

import argparse
import json
import os
import sqlite3

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["broken", "fixed"], required=True)
parser.add_argument("--input", required=True)
parser.add_argument("--db", required=True)
args = parser.parse_args()

db = sqlite3.connect(args.db)
db.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT, key TEXT, seq INTEGER)")
db.execute("CREATE TABLE IF NOT EXISTS offsets (partition INTEGER PRIMARY KEY, next INTEGER)")
db.commit()

consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)


def on_assign(consumer, partitions):
    if args.mode == "fixed":
        stored = dict(db.execute("SELECT partition, next FROM offsets"))
        consumer.assign(
            [
                TopicPartition(tp.topic, tp.partition, stored.get(tp.partition, OFFSET_BEGINNING))
                for tp in partitions
            ]
        )


consumer.subscribe([args.input], on_assign=on_assign)
while True:
    messages = [m for m in consumer.consume(100, 1.0) if m.error() is None]
    if not messages:
        continue
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders VALUES (?, ?, ?)", (order["id"], order["key"], order["seq"])
            )
            if args.mode == "fixed":
                db.execute(
                    "INSERT OR REPLACE INTO offsets VALUES (?, ?)",
                    (message.partition(), message.offset() + 1),
                )
    if args.mode == "broken":
        consumer.commit(asynchronous=False)
