"""A transactional copier (consume-transform-produce), run as a process the tests SIGKILL.

Usage: python -m tests.integration.copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [PROTOCOL [PAUSE]]

PROTOCOL is the consumer's ``group.protocol``: ``classic`` (the default, a static member
with a 6 s session) or ``consumer`` (KIP-848: a dynamic member; the broker decides the
session timeout). PAUSE (seconds, default 0) is slept after every transaction, so a test
can kill a broker node while the copy is still under way.

Copies every record of INPUT to the same partition of OUTPUT inside Kafka transactions of
about 200 records with its consumer offsets (send_offsets_to_transaction), aborting every
third transaction and rewinding to the committed offsets (with a new producer, a new
epoch, when records of the aborted transaction were unacknowledged). Exits once the group's
committed offsets reached the end of every partition of INPUT. Traces every transaction
(its batch, the offsets sent, commit or abort), rewind and rebalance on stderr.
"""

from __future__ import annotations

import functools
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from onceflow.client_errors import is_fatal

TRANSACTION_SIZE = 200


def trace(*words: object) -> None:
    print(f"{time.time():.3f}", *words, file=sys.stderr, flush=True)


def spans(messages: list) -> str:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for message in messages:
        first.setdefault(message.partition(), message.offset())
        last[message.partition()] = message.offset()
    return " ".join(f"{p}:{first[p]}-{last[p]}" for p in sorted(first))


def offsets_text(partitions: list) -> str:
    return " ".join(f"{p.partition}:{p.offset}" for p in partitions)


def rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    committed_offsets = consumer.committed(assignment, timeout=10)
    trace("rewind to", offsets_text(committed_offsets))
    for committed in committed_offsets:
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
    producer_config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 5,
    }
    producer = Producer(producer_config)
    producer.init_transactions(30)
    unacknowledged = [0]  # the open transaction's records without a delivery report

    def delivered(count: list[int], error: KafkaError | None, _message: object) -> None:
        if error is None:
            count[0] -= 1

    def abort_and_rewind() -> None:
        """Abort; rewind to the committed offsets; if records of the aborted transaction
        are unacknowledged, continue with a new producer (a new epoch): librdkafka would
        give their sequence numbers to the retried records, which a new partition leader
        holding the aborted batch then takes for duplicates (never written, offsets
        committed). See KafkaTransaction.abort in onceflow.patterns.transactional."""
        nonlocal producer
        producer.poll(0)
        producer.abort_transaction(30)
        trace("txn", transactions, "aborted", unacknowledged[0], "unacknowledged")
        if unacknowledged[0] > 0:
            producer.close()
            producer = Producer(producer_config)
            producer.init_transactions(30)
        rewind(consumer)

    consumer.subscribe(
        [source],
        on_assign=lambda c, ps: trace("assigned", offsets_text(ps)),
        on_revoke=lambda c, ps: trace("revoked", offsets_text(ps)),
        on_lost=lambda c, ps: trace("lost", offsets_text(ps)),
    )
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
        unacknowledged = [0]
        try:
            for message in messages:
                producer.produce(
                    target,
                    key=message.key(),
                    value=message.value(),
                    partition=message.partition(),
                    on_delivery=functools.partial(delivered, unacknowledged),
                )
                unacknowledged[0] += 1
            positions = consumer.position(consumer.assignment())
            trace("txn", transactions, "batch", spans(messages), "offsets", offsets_text(positions))
            producer.send_offsets_to_transaction(
                positions,
                consumer.consumer_group_metadata(),
                30,
            )
            if transactions % 3 == 0:
                abort_and_rewind()
            else:
                producer.commit_transaction(30)
                trace("txn", transactions, "committed")
        except KafkaException as error:
            trace("txn", transactions, "error", error)
            if error.args[0].txn_requires_abort():
                abort_and_rewind()
            else:
                raise
        time.sleep(float(pause))
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:8])
