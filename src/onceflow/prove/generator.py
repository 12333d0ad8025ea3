"""The built-in input: keyed, sequence-numbered JSON records, the same for a given size.

Record ``n`` (0-based) has key ``k{n % keys}`` and value
``{"id": "k3-17", "key": "k3", "seq": 17}`` where ``seq`` counts the records of that key.
The Kafka key is the key's text, so every record of a key lands in one partition and the
audit can check per-key order.
"""

from __future__ import annotations

import json
import threading
import time
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


def produce_input(
    bootstrap: str,
    topic: str,
    count: int,
    keys: int,
    rate: float | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Write the records (idempotent producer, acks=all), all at once or ``rate`` records
    per second; returns how many were written."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
         "log_level": 0}
    )  # fmt: skip
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    started = time.monotonic()
    for n, record in enumerate(input_records(count, keys)):
        if cancel is not None and cancel.is_set():
            break
        if rate is not None:
            delay = started + n / rate - time.monotonic()
            if delay > 0:
                producer.flush(delay)  # sends what is due meanwhile
                time.sleep(max(0.0, started + n / rate - time.monotonic()))
        producer.produce(topic, record.value(), record.key.encode(), on_delivery=delivered)
        producer.poll(0)
    if producer.flush(30) or failures:
        raise ProveError(f"could not write the input to {topic!r}: {failures[:1] or 'timeout'}")
    return count


class InputFeeder:
    """Writes the input at a steady rate in a background thread, so that a command-mode
    pipeline keeps making progress across its lives (kills land mid-stream)."""

    def __init__(self, bootstrap: str, topic: str, count: int, keys: int, rate: float) -> None:
        self.done = threading.Event()
        self._cancel = threading.Event()
        self.error: ProveError | None = None
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, count, keys, rate), daemon=True
        )
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, count: int, keys: int, rate: float) -> None:
        try:
            produce_input(bootstrap, topic, count, keys, rate, self._cancel)
        except ProveError as error:
            self.error = error
        finally:
            self.done.set()

    def stop(self) -> None:
        """Stop writing (a trial that failed early) and wait for the thread; raise its error."""
        if not self.done.is_set():
            self._cancel.set()
        self._thread.join()
        if self.error is not None:
            raise self.error
