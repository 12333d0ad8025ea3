"""Produce and consume through confluent-kafka against a real broker process."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.kit.clients import create_topic


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, **extra: str):
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False, **extra}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + 30
    while len(messages) < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            assert message.error() is None, message.error()
            messages.append(message)
    consumer.close()
    return messages


def test_idempotent_producer_keeps_per_key_order_and_partition(kafka_broker):
    create_topic(kafka_broker.bootstrap, "orders", 4)
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
        }
    )
    delivered = {}

    def on_delivery(error, message):
        assert error is None, error
        delivered[(message.key(), message.value())] = (message.partition(), message.offset())

    for number in range(3000):
        producer.produce(
            "orders",
            key=f"k{number % 17}".encode(),
            value=str(number).encode(),
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    messages = consume_all(kafka_broker.bootstrap, "orders", 4, 3000)
    assert len(messages) == 3000
    partition_of_key: dict[bytes, int] = {}
    last_value: dict[bytes, int] = {}
    offsets: dict[int, list[int]] = {}
    for message in messages:
        key, value = message.key(), int(message.value())
        assert partition_of_key.setdefault(key, message.partition()) == message.partition()
        assert value > last_value.get(key, -1), "per-key order broken"
        last_value[key] = value
        offsets.setdefault(message.partition(), []).append(message.offset())
        assert delivered[(key, message.value())] == (message.partition(), message.offset())
    for partition_offsets in offsets.values():
        assert partition_offsets == list(range(len(partition_offsets)))
