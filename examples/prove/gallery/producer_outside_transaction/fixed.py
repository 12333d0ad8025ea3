"""FIXED: every output goes through the transactional producer. The notifications are
produced in the same Kafka transaction as the events and the consumer's offsets, so a
kill aborts all of them together and the redelivered batch writes each once.

    onceflow prove command --input orders --output topic:order-events \\
        --output topic:order-notifications --quick -- python fixed.py
"""

import json
import os

from confluent_kafka import Consumer, Producer

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": "order-events",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "order-events"})
producer.init_transactions()
consumer.subscribe([os.environ["ONCEFLOW_INPUT_TOPIC"]])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    producer.begin_transaction()
    for message in messages:
        order = json.loads(message.value())
        event = {**order, "status": "accepted"}
        producer.produce("order-events", json.dumps(event), key=message.key())
        producer.produce("order-notifications", json.dumps(event), key=message.key())
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
