"""benchmarks/spark_pipeline.py's data: its input topic, the plain consumer it measures the
source against, and counts of what the sinks wrote."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": True,
        }
    )
    started = time.monotonic()
    for n in range(records):
        store = f"s{n % 50}"
        value = json.dumps({"id": f"e{n}", "store": store, "amount": n % 100, "ts": n})
        while True:
            try:
                producer.produce(topic, key=store, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records not acknowledged")
    return time.monotonic() - started


def count_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> int:
    """Records a read_committed consumer gets from ``topic`` (waits up to 60 s for them)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count = 0
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                error = message.error()
                if error is None:
                    count += 1
                    at_end.discard(message.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            if len(at_end) == partitions and count >= expected:
                break
    finally:
        consumer.close()
    return count


# -- modes ------------------------------------------------------------------------------


def plain_consumer(
    bootstrap: str, topic: str, partitions: int, records: int, tuned: bool = True
) -> float:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-plain-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    if tuned:  # what the onceflow source sets too (see onceflow.spark.kafka_source.reader)
        config["fetch.queue.backoff.ms"] = 20
    consumer = Consumer(config)
    try:
        consumer.list_topics(topic, timeout=10)  # connection and metadata: not timed
        started = time.monotonic()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        count = 0
        size = 0
        deadline = started + 600
        while count < records:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    count += 1
                    size += len(message.value())
            if time.monotonic() > deadline:
                raise RuntimeError(f"plain consumer got {count} of {records} records")
        return time.monotonic() - started
    finally:
        consumer.close()


def table_count(url: str, table: str) -> int:
    from onceflow.db import Database

    db = Database(url)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


def table_totals(url: str, table: str) -> tuple[int, int]:
    from onceflow.db import Database

    db = Database(url)
    try:
        revenue, orders = db.execute(f"SELECT SUM(revenue), SUM(orders) FROM {table}").fetchone()
        return int(revenue), int(orders)
    finally:
        db.close()
