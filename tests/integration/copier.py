"""A transactional copier (consume-transform-produce), run as a process the tests SIGKILL.

Usage: python -m tests.integration.copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [PROTOCOL [PAUSE]]

PROTOCOL is the consumer's ``group.protocol``: ``classic`` (the default, a static member
with a 6 s session) or ``consumer`` (KIP-848: a dynamic member; the broker decides the
session timeout). PAUSE (seconds, default 0) is slept after every transaction, so a test
can kill a broker node while the copy is still under way.

Copies every record of INPUT to the same partition of OUTPUT inside Kafka transactions of
about 200 records with its consumer offsets (send_offsets_to_transaction), aborting every
third transaction and rewinding to the committed offsets. Exits once the group's
committed offsets reached the end of every partition of INPUT.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from onceflow.client_errors import is_fatal

TRANSACTION_SIZE = 200


def rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for committed in consumer.committed(assignment, timeout=10):
        offset = committed.offset if committed.offset >= 0 else 0
        consumer.seek(TopicPartition(committed.topic, committed.partition, offset))


def caught_up(consumer: Consumer, topic: str) -> bool:
    """True when the group's committed offsets reached the end of every partition of ``topic``.

    Committed offsets, not positions: a partition copied completely by an earlier
    incarnation yields no message here, so its position stays unset.
    """
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], 10)
        behind = []
        for partition in committed:
            _, end = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
            if partition.offset < end:
                behind.append(f"{partition.partition}:{partition.offset}<{end}")
    except KafkaException:
        return False  # the broker is restarting
    if behind:
        print("behind", " ".join(behind), file=sys.stderr, flush=True)
    return not behind


def main(
    bootstrap: str,
    source: str,
    target: str,
    group: str,
    transactional_id: str,
    protocol: str = "classic",
    pause: str = "0",
) -> None:
    membership = {
        "session.timeout.ms": 6000,
        # Static membership: a restarted copier takes over its dead incarnation's
        # partitions at once instead of waiting for the session timeout.
        "group.instance.id": f"{transactional_id}-member",
    }
    if protocol == "consumer":
        membership = {"group.protocol": "consumer"}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **membership,
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    transactions = 0
    while True:
        messages = []
        for message in consumer.consume(TRANSACTION_SIZE, 0.5):
            error = message.error()
            if error is None:
                messages.append(message)
            elif is_fatal(error):  # e.g. fenced: exit, to be restarted, not poll a dead consumer
                raise KafkaException(error)
        if not messages:
            if caught_up(consumer, source):
                break
            continue
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
        time.sleep(float(pause))
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:8])
