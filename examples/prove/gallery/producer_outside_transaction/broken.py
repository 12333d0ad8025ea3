"""BROKEN: a producer outside the transaction. Orders are copied to order-events with Kafka
transactions (the offsets committed in the same transaction), but each order also goes to
order-notifications through a second, plain Producer: a kill before the transaction
commits aborts the events and redelivers the batch, and its notifications, already sent,
are sent again (duplicated, visible to read_committed consumers).

    onceflow prove command --input orders --output topic:order-events \\
        --output topic:order-notifications --quick -- python broken.py
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
notifier = Producer({"bootstrap.servers": bootstrap})
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
        notifier.produce("order-notifications", json.dumps(event), key=message.key())
    notifier.flush()  # the notifications are out before the batch's offsets commit
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
