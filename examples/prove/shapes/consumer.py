"""A plain confluent-kafka consumer in every group shape Kafka has, broken or fixed.

    onceflow prove command --input orders --output table:orders --schema schema.sql --quick \\
        -- python consumer.py [--protocol classic|consumer] [--cooperative] \\
           [--instance-id ID] [--assign] [--fixed]

The shapes: subscribe() with the classic protocol and Kafka's default session timeout (45 s)
and eager rebalancing; --cooperative (cooperative-sticky); --protocol consumer (KIP-848,
rebalanced by the broker); --instance-id (static membership: a restarted member keeps its
partitions); --assign (no group membership at all). Run several with `--workers N`.

Broken (the default): the rows are committed to SQLite, then the offsets to Kafka, two
transactions: a death in between processes the batch again. Fixed (--fixed): the rows and
the next offsets in one SQLite transaction, and on every assignment the consumer seeks to
the offsets SQLite holds; nothing is committed to Kafka.
"""

import argparse
import json
import os
import sqlite3

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

parser = argparse.ArgumentParser()
parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
parser.add_argument("--cooperative", action="store_true")
parser.add_argument("--instance-id")
parser.add_argument("--assign", action="store_true")
parser.add_argument("--fixed", action="store_true")
args = parser.parse_args()

topic = os.environ["ONCEFLOW_INPUT_TOPIC"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30)
db.execute("CREATE TABLE IF NOT EXISTS offsets (partition INTEGER PRIMARY KEY, next INTEGER)")
db.commit()

settings = {
    "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
    "group.id": "orders-to-sqlite",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
}
if args.protocol == "consumer":
    settings["group.protocol"] = "consumer"
elif args.cooperative:
    settings["partition.assignment.strategy"] = "cooperative-sticky"
if args.instance_id:
    settings["group.instance.id"] = args.instance_id
consumer = Consumer(settings)


def stored(partitions):
    """The partitions at the offsets SQLite holds (the beginning where it holds none)."""
    rows = dict(db.execute("SELECT partition, next FROM offsets"))
    return [
        TopicPartition(tp.topic, tp.partition, rows.get(tp.partition, OFFSET_BEGINNING))
        for tp in partitions
    ]


def on_assign(consumer, partitions):
    if not args.fixed:
        return  # the committed offsets, as the group has them
    if args.cooperative or args.protocol == "consumer":  # incremental rebalancing
        consumer.incremental_assign(stored(partitions))
    else:
        consumer.assign(stored(partitions))


if args.assign:
    metadata = consumer.list_topics(topic, timeout=30).topics[topic]
    everything = [TopicPartition(topic, p) for p in sorted(metadata.partitions)]
    if args.fixed:
        consumer.assign(stored(everything))
    else:
        consumer.assign(consumer.committed(everything, timeout=30))
else:
    consumer.subscribe([topic], on_assign=on_assign)

while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    if not messages:
        continue
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                (order["id"], order["key"], order["seq"]),
            )
            if args.fixed:
                db.execute(
                    "INSERT INTO offsets (partition, next) VALUES (?, ?) ON CONFLICT "
                    "(partition) DO UPDATE SET next = excluded.next",
                    (message.partition(), message.offset() + 1),
                )
    if not args.fixed:
        consumer.commit(asynchronous=False)
