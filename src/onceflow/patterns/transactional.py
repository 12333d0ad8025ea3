"""Consume-transform-produce in Kafka transactions.

Steps of one batch (crash points between them):

1. consume a batch (input read with ``isolation.level=read_committed``) (``after_consume``);
2. begin the Kafka transaction (``after_begin``);
3. transform and produce the outputs into the transaction (``after_produce``);
4. add the consumer positions to the transaction (``send_offsets_to_transaction``, with the
   group metadata so the broker fences a zombie of an older generation)
   (``after_send_offsets``);
5. commit the transaction (``after_kafka_commit``).

With the Runner's ``commit_interval_ms`` the batches of one interval repeat steps 1 and 3
inside one transaction, and steps 4 and 5 run once for all of them.

Outputs and input offsets become visible together or not at all. A crash anywhere before
step 5 leaves an open transaction that the next ``init_transactions`` with the same
``transactional.id`` aborts (fencing the zombie); the batch is consumed again. On an
error the transaction is aborted and the consumer rewinds to the batch's first offsets
("abort and rewind"). If the aborted transaction had records whose delivery was not
acknowledged (e.g. in flight to a partition leader that died), the producer is replaced
by a new one with the same ``transactional.id``: see ``KafkaTransaction.abort``. A fenced
producer (another instance took the transactional.id) stops
the loop with ``ProducerFenced``: it must not go on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from onceflow.producing import abort_transaction, produce_waiting

STEPS = ("after_consume", "after_begin", "after_produce", "after_send_offsets",
         "after_kafka_commit")  # fmt: skip

log = logging.getLogger(__name__)

# librdkafka 2.13+ "re-bootstraps" when every broker is down (a one-broker cluster that
# restarts, a network cut): it decommissions the known brokers, and a transactional
# producer whose group coordinator was decommissioned can then block in
# send_offsets_to_transaction() past its timeout, forever (librdkafka issue #5511).
# Without re-bootstrap the producer simply reconnects to the same brokers.
TRANSACTIONAL_PRODUCER_DEFAULTS = {"metadata.recovery.strategy": "none"}


class ProducerFenced(RuntimeError):
    """Another producer with the same transactional.id took over; this one must stop."""


class TransactionFailed(RuntimeError):
    """The transaction was aborted; the consumer was rewound to the batch start."""


def batch_start_offsets(messages: Iterable[Message]) -> dict[tuple[str, int], int]:
    """The first offset of each partition in a batch (where to rewind on abort)."""
    starts: dict[tuple[str, int], int] = {}
    for message in messages:
        starts.setdefault((message.topic(), message.partition()), message.offset())
    return starts


def next_offsets(messages: Iterable[Message]) -> dict[tuple[str, int], int]:
    """The offset after each partition's last message in a batch."""
    ends: dict[tuple[str, int], int] = {}
    for message in messages:
        ends[(message.topic(), message.partition())] = message.offset() + 1
    return ends


def rewind(consumer: Consumer, starts: dict[tuple[str, int], int]) -> None:
    """Seek every partition of the batch back to its first offset."""
    owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    for (topic, partition), offset in starts.items():
        if (topic, partition) in owned:
            consumer.seek(TopicPartition(topic, partition, offset))


def is_fenced(error: KafkaError) -> bool:
    return error.fatal() or error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )


class KafkaTransaction:
    """A transactional producer running one transaction at a time."""

    def __init__(
        self,
        bootstrap_servers: str,
        transactional_id: str,
        producer_config: dict[str, Any] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.transactional_id = transactional_id
        self.config = {
            "bootstrap.servers": bootstrap_servers,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **TRANSACTIONAL_PRODUCER_DEFAULTS,
            **(producer_config or {}),
        }
        self.producer = self._new_producer()
        self.open = False
        self.renewals = 0  # producers replaced after an abort with unacknowledged records

    def _new_producer(self) -> Producer:
        producer = Producer(self.config)
        try:
            # Fences older instances (a new producer epoch) and aborts the transaction a
            # dead one left open.
            producer.init_transactions(self.timeout_s)
        except KafkaException as error:
            name = self.transactional_id
            raise ProducerFenced(f"init_transactions({name!r}): {error}") from error
        return producer

    def begin(self) -> None:
        self.producer.begin_transaction()
        self.open = True

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
    ) -> None:
        fields: dict[str, Any] = {"value": value, "key": key}
        if headers:
            fields["headers"] = list(headers)
        if partition is not None:
            fields["partition"] = partition
        produce_waiting(self.producer, topic, **fields)

    def send_offsets(self, consumer: Consumer, offsets: dict[tuple[str, int], int]) -> None:
        self.producer.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            consumer.consumer_group_metadata(),
            self.timeout_s,
        )

    def commit(self) -> None:
        self.producer.commit_transaction(self.timeout_s)
        self.open = False

    def abort(self) -> None:
        """Abort the open transaction.

        Records still unacknowledged here may have been written by a partition leader that
        then died; librdkafka (2.16, transactions v1: one producer epoch for all
        transactions) gives their sequence numbers to the next records of the partition.
        Retried in the next transaction with the same epoch, those records would be taken
        by the new leader for duplicates of the aborted batch, acknowledged and never
        written: their offsets would commit without them. A new producer (a new epoch,
        sequences from 0) makes that impossible.

        The unacknowledged records are counted by the client's own queue: after the
        delivery reports that arrived are served, ``len(producer)`` counts the records
        queued, in flight or acknowledged without their report served yet (and requests
        in flight), never fewer than the unacknowledged ones; no per-record delivery
        callback is needed.
        """
        if not self.open:
            return
        self.producer.poll(0)
        unacknowledged = len(self.producer)
        try:
            abort_transaction(self.producer, self.timeout_s)
        finally:
            self.open = False
        if unacknowledged > 0:
            log.warning(
                "aborted a transaction with up to %d unacknowledged records: new producer epoch",
                unacknowledged,
            )
            self.renewals += 1
            self.producer.close()
            self.producer = self._new_producer()

    def fail(self, error: KafkaException, consumer: Consumer, starts: dict) -> None:
        """Handle a transaction error: abort and rewind, or raise ProducerFenced."""
        kafka_error: KafkaError = error.args[0]
        if is_fenced(kafka_error) and not kafka_error.txn_requires_abort():
            raise ProducerFenced(str(kafka_error)) from error
        try:
            self.abort()
        except KafkaException as abort_error:
            raise ProducerFenced(f"abort failed: {abort_error}") from error
        rewind(consumer, starts)
        raise TransactionFailed(str(kafka_error)) from error

    def close(self) -> None:
        if self.open:
            try:
                self.abort()
            except KafkaException:
                pass
        self.producer.flush(5)
        self.producer.close()  # its connections end now, not when it is garbage-collected
