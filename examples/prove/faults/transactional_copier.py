"""A consume-transform-produce copier with Kafka transactions, as the client docs sketch it,
minus one line: when a commit fails it aborts and goes on with the next batch.

    onceflow prove command --input orders --output topic:orders-copy --kafka-cluster \\
        --faults txn-coordinator --quick -- python transactional_copier.py [--rewind] \\
        [--work-ms 5] [--group transactional-copier]

Broken: after abort_transaction() the consumer's position is still past the aborted batch,
so the batch is never copied. Killing the copier cannot show this (a restarted copier
resumes from the offsets the last committed transaction stored); a commit that fails can,
and one does when the node coordinating the transactional id dies (``--faults
txn-coordinator`` on an Apache Kafka cluster).

Fixed (``--rewind``): a step of the commit (the offsets, the commit itself) that fails with
a retriable error is made again; after an abort the consumer seeks back to the offsets its
group has committed. (Retrying only the commit after the offsets failed commits the batch
without its offsets: a later abort's rewind then copies it twice.)

Both make a new producer when the abort itself fails (librdkafka refuses an abort while
the commit_transaction call that timed out is in progress, or gives the producer up), or
when the producer refuses the next transaction after an abort (a fatal error such as
OUT_OF_ORDER_SEQUENCE_NUMBER, or _STATE), whatever the error, as long-running services
do, and go on: a copier that crashed there instead was restarted from its committed
offsets, lost nothing, and the proof held (1 of 7 runs of the group-coordinator case; the
txn-coordinator case in a fresh-clone run, 2026-12-06, after "Unable to produce message:
Local: Erroneous state").
"""

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

parser = argparse.ArgumentParser()
parser.add_argument("--output", default="orders-copy")
parser.add_argument("--rewind", action="store_true")
parser.add_argument("--work-ms", type=float, default=5.0, help="work per record (a lookup)")
parser.add_argument("--group", default="transactional-copier")
args = parser.parse_args()

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    }
)


def transactional_producer() -> Producer:
    made = Producer({"bootstrap.servers": bootstrap, "transactional.id": "orders-copier"})
    made.init_transactions()
    return made


producer = transactional_producer()


def said(what: str) -> None:
    now = time.time()
    print(f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now * 1000) % 1000:03d} {what}",
          file=sys.stderr, flush=True)  # fmt: skip


consumer.subscribe(
    [os.environ["ONCEFLOW_INPUT_TOPIC"]],
    on_assign=lambda _, partitions: said(f"assigned {[p.partition for p in partitions]}"),
    on_revoke=lambda _, partitions: said(f"revoked {[p.partition for p in partitions]}"),
)


def rewind() -> None:
    """Back to the offsets the group committed (the last committed transaction's)."""
    assigned = consumer.assignment()
    for tp in consumer.committed(assigned, timeout=60):
        consumer.seek(tp if tp.offset >= 0 else TopicPartition(tp.topic, tp.partition, 0))


def again_while_retriable(call, *arguments):
    """--rewind: a call that fails with a retriable error is made again (the client docs:
    the transaction is still good); the broken copier gives the transaction up at once."""
    while True:
        try:
            return call(*arguments)
        except KafkaException as error:
            if (
                not args.rewind
                or not error.args[0].retriable()
                or error.args[0].txn_requires_abort()
            ):
                raise


def copy(messages) -> None:
    producer.begin_transaction()
    for message in messages:
        time.sleep(args.work_ms / 1000)  # the record's enrichment
        producer.produce(args.output, message.value(), message.key())


while True:
    messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
    if not messages:
        continue
    try:
        copy(messages)
    except KafkaException as error:
        # the producer unusable after an abort (a fatal error such as OUT_OF_ORDER_SEQUENCE
        # for records a dead leader may have kept, or _STATE: librdkafka still bumping its
        # epoch) refuses the next transaction's records: a new one takes over (its
        # init_transactions() aborts what the old one left open)
        said(f"the producer cannot go on ({error.args[0]}): a new producer")
        producer = transactional_producer()
        copy(messages)
    positions = consumer.position(consumer.assignment())
    group = consumer.consumer_group_metadata()
    step = "sending the offsets"
    try:
        again_while_retriable(producer.send_offsets_to_transaction, positions, group, 5)
        step = "the commit"
        again_while_retriable(producer.commit_transaction, 5)
    except KafkaException as error:
        first = messages[0]
        said(
            f"{step} failed ({error.args[0]}): aborting the transaction of {len(messages)} "
            f"records from partition {first.partition()} offset {first.offset()}"
        )
        try:
            producer.abort_transaction(10)
        except KafkaException as failed:
            # the failed commit still in flight when the abort came: librdkafka refuses the
            # abort (_CONFLICT: the commit_transaction call that timed out is in progress),
            # gives the producer up (a fatal error), or the abort waits on records sent to
            # a dead leader (one waited over a minute, 2026-12-06, without a timeout); a new
            # producer with the same transactional.id fences it and aborts its transaction
            said(f"abort failed ({failed.args[0]}): a new producer")
            producer = transactional_producer()
        if args.rewind:
            rewind()
