"""A transactional copier (consume-transform-produce), run as a process the tests SIGKILL.

Usage: python -m tests.integration.copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID

Copies every record of INPUT to the same partition of OUTPUT inside Kafka transactions of
about 200 records with its consumer offsets (send_offsets_to_transaction), aborting every
third transaction and rewinding to the committed offsets. Exits when idle for 5 s.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TRANSACTION_SIZE = 200


def rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for committed in consumer.committed(assignment, timeout=10):
        offset = committed.offset if committed.offset >= 0 else 0
        consumer.seek(TopicPartition(committed.topic, committed.partition, offset))


def main(bootstrap: str, source: str, target: str, group: str, transactional_id: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    transactions = 0
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 5:
        messages = [m for m in consumer.consume(TRANSACTION_SIZE, 0.5) if m.error() is None]
        if not messages:
            continue
        idle_since = time.monotonic()
        transactions += 1
        producer.begin_transaction()
        try:
            for message in messages:
                producer.produce(
                    target,
                    key=message.key(),
                    value=message.value(),
                    partition=message.partition(),
                )
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                30,
            )
            if transactions % 3 == 0:
                producer.abort_transaction(30)
                rewind(consumer)
            else:
                producer.commit_transaction(30)
        except KafkaException as error:
            if error.args[0].txn_requires_abort():
                producer.abort_transaction(30)
                rewind(consumer)
            else:
                raise
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
