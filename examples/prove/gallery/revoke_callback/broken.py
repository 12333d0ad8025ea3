"""BROKEN: a consumer group whose revoke callback commits work it has abandoned. Each worker
buffers the orders of its partitions and writes them every 100 orders or every 2 seconds
(idempotently: the order id is the primary key), committing the offsets after the write.
When a rebalance takes partitions away, on_revoke drops their buffered orders ("another
worker owns them now") and commits the consumer's position, which is past those orders:
nobody writes them (missing). Run it as a group of three, so that every restart of a
worker rebalances the others:

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        --workers 3 --quick -- python broken.py
"""

import json
import os
import sqlite3
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30)
buffered = {}  # partition -> messages read and not written yet
flushed_at = time.monotonic()


def flush(partitions):
    """Write the buffered orders of these partitions, then commit the offsets after them."""
    global flushed_at
    messages = [m for p in partitions for m in buffered.pop(p, [])]
    if not messages:
        return
    with db:
        for message in messages:
            order = json.loads(message.value())
            db.execute(
                "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (order["id"], order["key"], order["seq"]),
            )
    offsets = {(m.topic(), m.partition()): m.offset() + 1 for m in messages}
    consumer.commit(
        offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
    )
    flushed_at = time.monotonic()


def on_revoke(consumer, partitions):
    for partition in partitions:
        buffered.pop(partition.partition, None)  # not ours any more: the next owner's work
    try:
        consumer.commit(asynchronous=False)  # keep our progress for the next owner
    except KafkaException:
        pass  # nothing read since the last commit


consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]], on_revoke=on_revoke)

while True:
    for message in consumer.consume(100, timeout=0.2):
        if not message.error():
            buffered.setdefault(message.partition(), []).append(message)
    pending = sum(len(messages) for messages in buffered.values())
    if pending >= 100 or (pending and time.monotonic() - flushed_at >= 2.0):
        flush(list(buffered))
