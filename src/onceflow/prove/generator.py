"""The built-in input: keyed, sequence-numbered JSON records, the same for a given size.

Record ``n`` (0-based) has key ``k{n % keys}`` and value
``{"id": "k3-17", "key": "k3", "seq": 17}`` where ``seq`` counts the records of that key.
The Kafka key is the key's text, so every record of a key lands in one partition and the
audit can check per-key order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from onceflow.prove.errors import ProveError


@dataclass(frozen=True, slots=True)
class InputRecord:
    id: str
    key: str
    seq: int

    def value(self) -> bytes:
        return json.dumps({"id": self.id, "key": self.key, "seq": self.seq}).encode()


def input_records(count: int, keys: int) -> Iterator[InputRecord]:
    seqs = [0] * keys
    for n in range(count):
        k = n % keys
        yield InputRecord(f"k{k}-{seqs[k]}", f"k{k}", seqs[k])
        seqs[k] += 1


def produce_input(bootstrap: str, topic: str, count: int, keys: int) -> int:
    """Write the records (idempotent producer, acks=all); returns how many were written."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
         "log_level": 0}
    )  # fmt: skip
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for record in input_records(count, keys):
        producer.produce(topic, record.value(), record.key.encode(), on_delivery=delivered)
        producer.poll(0)
    if producer.flush(30) or failures:
        raise ProveError(f"could not write the input to {topic!r}: {failures[:1] or 'timeout'}")
    return count
