"""Several workers of one group keep their offsets in SQLite, in the rows' transaction, and
seek to them whenever they are assigned partitions (the offsets-in-the-database pattern),
but never check, when they commit, that the partition is still theirs.

    onceflow prove command --input orders --output table:orders --schema schema.sql \\
        --workers 2 --faults coordinator-cut --quick -- python unfenced_consumer.py [--fenced]

Broken: a worker cut off from its group coordinator loses its group membership (its
session ends, here at once; in production after session.timeout.ms) and another worker
takes its partitions from the offsets in SQLite, while the first still fetches them: both
write the same records, and each moves the stored offsets. Killing workers cannot show
this: a dead worker writes nothing. Cutting one off does (``--faults coordinator-cut``).

Fixed (``--fenced``): the offset update is a compare-and-set (the offset the batch started
from must still be stored); a batch whose partition moved on is rolled back, and the worker
seeks to what is stored.
"""

import argparse
import json
import os
import sqlite3

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

parser = argparse.ArgumentParser()
parser.add_argument("--fenced", action="store_true")
args = parser.parse_args()

topic = os.environ["ONCEFLOW_INPUT_TOPIC"]
db = sqlite3.connect(os.environ["ONCEFLOW_DATABASE_PATH"], timeout=30)
db.execute("CREATE TABLE IF NOT EXISTS offsets (partition INTEGER PRIMARY KEY, next INTEGER)")
db.commit()
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["ONCEFLOW_BOOTSTRAP"],
        "group.id": "orders-to-sqlite",
        "enable.auto.commit": False,
    }
)


def stored(partitions):
    rows = dict(db.execute("SELECT partition, next FROM offsets"))
    return [
        TopicPartition(tp.topic, tp.partition, rows.get(tp.partition, OFFSET_BEGINNING))
        for tp in partitions
    ]


consumer.subscribe([topic], on_assign=lambda c, partitions: c.assign(stored(partitions)))
while True:
    messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
    if not messages:
        continue
    by_partition = {}
    for message in messages:
        by_partition.setdefault(message.partition(), []).append(message)
    for partition, batch in by_partition.items():
        first, last = batch[0].offset(), batch[-1].offset()
        with db:
            for message in batch:
                order = json.loads(message.value())
                db.execute(
                    "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)",
                    (order["id"], order["key"], order["seq"]),
                )
            if not args.fenced:
                db.execute("INSERT OR REPLACE INTO offsets VALUES (?, ?)", (partition, last + 1))
                continue
            moved = db.execute(
                "UPDATE offsets SET next = ? WHERE partition = ? AND next = ?",
                (last + 1, partition, first),
            ).rowcount
            if not moved:  # a first batch, or a partition another worker moved on
                if db.execute("SELECT 1 FROM offsets WHERE partition = ?", (partition,)).fetchone():
                    db.rollback()
                    consumer.seek(stored([TopicPartition(topic, partition)])[0])
                    continue
                db.execute("INSERT INTO offsets VALUES (?, ?)", (partition, last + 1))
