"""The upstream stage the copiers read: prices each order and writes it to priced-orders in
Kafka transactions (the input offsets in the same transaction). Its pricing call times
out now and then; the batch's transaction is then aborted and the batch priced again,
so priced-orders holds records of aborted transactions next to the committed ones.
It is correct: a read_committed reader sees every order priced once.

    python pricing.py        (reads $ONCEFLOW_BOOTSTRAP and $ONCEFLOW_INPUT_TOPIC)
"""

import json
import os
import random
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]


def price(order):
    """The pricing service: a couple of milliseconds a call, and about one call in 200
    times out."""
    time.sleep(0.002)
    if random.random() < 1 / 200:
        raise TimeoutError("pricing service timed out")
    return 100 + order["seq"] % 50


consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": "pricing",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "pricing"})
producer.init_transactions()
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    producer.begin_transaction()
    try:
        for message in messages:
            order = json.loads(message.value())
            priced = {**order, "price": price(order)}
            producer.produce("priced-orders", json.dumps(priced), key=message.key())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        producer.commit_transaction()
    except TimeoutError:
        producer.abort_transaction()
        first = {}
        for message in messages:
            first.setdefault(message.partition(), message.offset())
        for partition, offset in first.items():  # price the batch again
            consumer.seek(TopicPartition(messages[0].topic(), partition, offset))
