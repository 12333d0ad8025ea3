"""BROKEN: a consume-transform-produce copy whose input is read with read_uncommitted. The
copier copies priced-orders to order-copies in Kafka transactions, but reads
priced-orders with isolation.level=read_uncommitted (for latency), so it also copies the
records of the upstream's aborted transactions; when the upstream prices that batch again
and commits it, the copier copies those orders a second time (order-copies: duplicated).

    onceflow prove command --input orders --output topic:priced-orders \\
        --output topic:order-copies --quick \\
        -- sh -c 'python pricing.py & exec python broken.py'

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
        "isolation.level": "read_uncommitted",
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
