"""FIXED: the copier reads with isolation.level=read_committed. It sees only the records of
the upstream's committed transactions (each order once) and copies them in its own
transactions, so order-copies holds each order once.

    onceflow prove command --input orders --output topic:priced-orders \\
        --output topic:order-copies --quick \\
        -- sh -c 'python pricing.py & exec python fixed.py'

pricing.py, the upstream, runs beside it during the proof.
"""

import os

from confluent_kafka import Consumer, Producer

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": "order-copier",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",  # librdkafka's default (Java's is not)
    }
)
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "order-copier"})
producer.init_transactions()
consumer.subscribe(["priced-orders"])

while True:
    messages = [m for m in consumer.consume(100, timeout=1.0) if not m.error()]
    if not messages:
        continue
    producer.begin_transaction()
    for message in messages:
        producer.produce("order-copies", message.value(), key=message.key())
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
