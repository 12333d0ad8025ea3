"""Where the Runner's ``ctx.produce`` sends a record: into the Kafka transaction
(kafka_transactions), into the outbox table in the batch's database transaction
(``outbox=True``), or to an idempotent producer that is flushed before the batch's offsets
are committed (otherwise)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from onceflow.configuration_error import ConfigurationError
from onceflow.db import DatabaseError, Transaction
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.transactional import KafkaTransaction
from onceflow.producing import produce_waiting


def idempotent_producer(bootstrap: str, config: Mapping[str, Any]) -> Producer:
    """An idempotent producer with acks=all; ``config`` adds to those settings."""
    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **config}
    )


def produce_record(
    producer: Producer,
    topic: str,
    value: bytes | str | None,
    key: bytes | str | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> None:
    """One output record to the client; called once per record, so the client is called
    here, not through more layers, and without a headers keyword when there are none
    (confluent-kafka parses keywords slowly: 0.4 us a call, benchmarks/README.md)."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(key, str):
        key = key.encode()
    try:
        if headers:
            producer.produce(topic, value, key, headers=list(headers))
        else:
            producer.produce(topic, value, key)
    except BufferError:  # the local queue is full: wait for it
        listed = list(headers) if headers else None
        produce_waiting(producer, topic, value=value, key=key, headers=listed)


class BatchOutput:
    def __init__(
        self,
        bootstrap: str,
        producer_config: Mapping[str, Any],
        txn: KafkaTransaction | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.producer_config = producer_config
        self.txn = txn
        self.outbox = outbox
        self._producer: Producer | None = None  # the direct producer (start_direct)
        self._errors: list[str] = []

    def produce(
        self,
        tx: Transaction | None,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
    ) -> None:
        if self.outbox is not None:
            if tx is None:
                raise ConfigurationError("outbox produce needs the database transaction")
            value = value.encode() if isinstance(value, str) else value
            key = key.encode() if isinstance(key, str) else key
            self.outbox.add(tx, topic, key, value, headers)
            return
        producer = self.batch_producer()
        if producer is None:
            producer = self._producer = self._direct_producer()
        produce_record(producer, topic, value, key, headers)

    def batch_producer(self) -> Producer | None:
        """The client a batch's records go to when it is one client call each: the
        transaction's producer, or the direct one once made (None: the outbox, or the
        direct producer not made yet; ``produce`` then)."""
        if self.outbox is not None:
            return None
        return self.txn.producer if self.txn is not None else self._producer

    def start_direct(self) -> None:
        """Make the direct producer now, unless outputs go into a Kafka transaction or the
        outbox: an idempotent producer's first record waits for its producer id (about
        0.5 s in librdkafka), which this takes out of the first batch. Handlers and the
        dead-letter topic produce through it."""
        if self._producer is None and self.txn is None and self.outbox is None:
            self._producer = self._direct_producer()

    def _direct_producer(self) -> Producer:
        # One delivery callback for the producer rather than one passed with each record,
        # which costs the client a few microseconds per record (benchmarks/README.md).
        return idempotent_producer(
            self.bootstrap,
            {"linger.ms": 5, **self.producer_config, "on_delivery": self._report},
        )

    def _report(self, error: Any, _message: Any) -> None:
        if error is not None:
            self._errors.append(str(error))

    def flush_direct(self) -> None:
        """Wait for the direct producer's records; a failure rolls the batch back."""
        if self._producer is None:
            return
        remaining = self._producer.flush(30)
        errors, self._errors = self._errors, []
        if remaining or errors:
            raise DatabaseError(  # rolls the batch back; it will be processed again
                f"producing failed ({remaining} unacknowledged, errors: {errors[:3]})"
            )

    def close(self) -> None:
        if self.txn is not None:
            self.txn.close()
        if self._producer is not None:
            self._producer.flush(10)
            self._producer.close()
            self._producer = None
