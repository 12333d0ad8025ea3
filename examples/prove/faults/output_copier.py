"""A copier that resumes from its own output: it consumes orders, produces each record to
the output topic's partition of the same number with its input offset in a header, and on
start reads the last record of every output partition to know where it stopped. No offset
is committed anywhere: the output is the checkpoint (Kafka Connect's and many hand-written
copiers' way before transactions).

    onceflow prove command --input orders --output topic:orders-copy --faults broker \\
        --quick -- python output_copier.py [--acks 1] [--idempotent] [--flush-timeout 1]

Broken, with confluent-kafka's defaults (enable.idempotence=false): when the broker dies
after it wrote a batch and before it answered, the producer sends the batch again and the
output holds it twice. Killing the copier cannot show this (it reads its output back on
every start); restarting the broker does (``--faults broker``), and so does a network that
drops the answer (``--faults network``). With ``--acks 1`` it also loses records when an
Apache Kafka partition leader dies before its followers copied what it acknowledged
(``--faults leader``): the copier is still running and goes on past them.

Fixed (``--idempotent``): enable.idempotence=true (and with it acks=all): the broker drops
a batch it already has.

Broken again (``--idempotent --flush-timeout 1``): the copier gives each batch a second to
be acknowledged (``producer.flush(1)``) and sends what is still unacknowledged then again,
as if it had failed. It has not: librdkafka still has it in flight and delivers it, and
the copies sent again are new records to the broker (idempotence drops only the
producer's own retries of a batch), so the output holds them twice. On a fast network a
batch is acknowledged in milliseconds; on a slow one (``--faults delay``: nothing lost,
every answer late) it takes longer than a second. Killing the copier cannot show this; a
broker restart or a network cut does too (an answer more than a second late). The fix is
the plain ``--idempotent``: ``flush()`` waits for every delivery report (librdkafka
retries on its own, for up to delivery.timeout.ms).
"""

import argparse
import os
import time
from functools import partial

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

parser = argparse.ArgumentParser()
parser.add_argument("--output", default="orders-copy")
parser.add_argument("--acks", default=None)
parser.add_argument("--idempotent", action="store_true")
parser.add_argument("--work-ms", type=float, default=5.0, help="work per record (a lookup)")
parser.add_argument(
    "--flush-timeout",
    type=float,
    default=None,
    help="seconds; what is unacknowledged then is sent again",
)
args = parser.parse_args()

bootstrap = os.environ["ONCEFLOW_BOOTSTRAP"]
source = os.environ["ONCEFLOW_INPUT_TOPIC"]
settings = {"bootstrap.servers": bootstrap, "linger.ms": 5}
if args.idempotent:
    settings["enable.idempotence"] = True
if args.acks is not None:
    settings["acks"] = args.acks
producer = Producer(settings)
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": "output-copier",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
)


def resume_points() -> list[TopicPartition]:
    """Every input partition, after the input offset its output partition ends with."""
    partitions = sorted(consumer.list_topics(source, timeout=30).topics[source].partitions)
    points = []
    for p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(args.output, p), timeout=30)
        offset = OFFSET_BEGINNING
        if high > low:  # read the last record of the output partition
            reader = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "output-copier-tail",
                    "enable.auto.commit": False,
                }
            )
            reader.assign([TopicPartition(args.output, p, high - 1)])
            last = None
            while last is None:
                message = reader.poll(5)
                if message is not None and message.error() is None:
                    last = message
            reader.close()
            offset = int(dict(last.headers())["input-offset"]) + 1
        points.append(TopicPartition(source, p, offset))
    return points


acknowledged: set[tuple[int, int]] = set()  # (partition, input offset) of this batch


def on_delivery(key: tuple[int, int], error: KafkaError | None, _record: Message) -> None:
    if error is None:
        acknowledged.add(key)


def send(message: Message) -> None:
    producer.produce(
        args.output,
        message.value(),
        message.key(),
        partition=message.partition(),
        headers={"input-offset": str(message.offset())},
        on_delivery=partial(on_delivery, (message.partition(), message.offset())),
    )


consumer.assign(resume_points())
while True:
    messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
    acknowledged.clear()
    for message in messages:
        time.sleep(args.work_ms / 1000)  # the record's enrichment
        send(message)
    if args.flush_timeout is None:
        producer.flush()
        continue
    while producer.flush(args.flush_timeout) > 0:
        late = [m for m in messages if (m.partition(), m.offset()) not in acknowledged]
        print(
            f"{len(late)} records not acknowledged in {args.flush_timeout:g} s: sending them again",
            flush=True,
        )
        for message in late:
            send(message)
