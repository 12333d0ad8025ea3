"""FIXED: the relay publishes in Kafka transactions and takes what is published from Kafka.
Each batch of outbox rows is one transaction of a producer with a fixed transactional.id,
each record carrying its outbox id in a header. On start the relay's init_transactions()
aborts whatever a killed relay left open; then it reads the last committed record of
every partition of the topic (read_committed) and marks every row up to the highest
outbox id found as published. A kill between the Kafka commit and the mark no longer
publishes the batch again: Kafka, not the mark, says what is published. (One relay per
transactional.id; rows are published in id order, which is their commit order in SQLite.)

    onceflow prove command --input orders --output table:orders \\
        --output topic:order-events --schema schema.sql --quick -- python fixed.py
"""

import json
import os
import sqlite3
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
database_path = os.environ["ONCEFLOW_DATABASE_PATH"]
TOPIC = "order-events"


def last_published(topic):
    """The highest outbox id committed to the topic: the largest in the last committed
    records of its partitions (0 when nothing is)."""
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "order-events-relay",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    highest, window = 0, 100
    partitions = reader.list_topics(topic, timeout=30).topics[topic].partitions
    ends = {
        p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions
    }
    todo = {p for p, (low, high) in ends.items() if high > low}
    while todo:  # the last `window` offsets of each partition; further back if none is data
        reader.assign(
            [TopicPartition(topic, p, max(ends[p][0], ends[p][1] - window)) for p in todo]
        )
        reading, found = set(todo), set()
        while reading:
            message = reader.poll(30)
            if message is None:
                raise RuntimeError(f"cannot read {topic}")
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(message.error().str())
                reading.discard(message.partition())
                continue
            found.add(message.partition())
            highest = max(highest, int(dict(message.headers())["outbox-id"]))
        todo = {p for p in todo - found if ends[p][1] - window > ends[p][0]}
        window *= 10
    reader.close()
    return highest


def relay():
    """Publish the outbox, oldest first, one Kafka transaction per batch."""
    db = sqlite3.connect(database_path, timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "order-events-relay"})
    producer.init_transactions()
    with db:
        db.execute(
            "UPDATE outbox SET published_at = CURRENT_TIMESTAMP "
            "WHERE id <= ? AND published_at IS NULL",
            (last_published(TOPIC),),
        )
    while True:
        rows = db.execute(
            "SELECT id, topic, key, payload FROM outbox WHERE published_at IS NULL "
            "ORDER BY id LIMIT 100"
        ).fetchall()
        if not rows:
            time.sleep(0.1)
            continue
        producer.begin_transaction()
        for outbox_id, topic, key, payload in rows:
            producer.produce(topic, payload, key=key, headers={"outbox-id": str(outbox_id)})
        producer.commit_transaction()
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
                        (TOPIC, order["key"], json.dumps({**order, "event": "created"})),
                    )
        consumer.commit(asynchronous=False)


threading.Thread(target=relay, daemon=True).start()
consume()
