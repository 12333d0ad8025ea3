"""The input: keyed JSON records, the same in every trial.

The built-in records: record ``n`` (0-based) has key ``k{n % keys}`` and value
``{"id": "k3-17", "key": "k3", "seq": 17}`` where ``seq`` counts the records of that key.
The Kafka key is the key's text, so every record of a key lands in one partition and the
audit can check per-key order.

A user's generator (``--generator MODULE:FUNCTION``) is called as ``FUNCTION(n, rng)``
for ``n`` = 0, 1, ... with one ``random.Random(0)`` for the whole input, and returns
``(key, value)``: the Kafka key (text) and the JSON value (a dict) of record ``n``. The
mapping's id and key fields name where the value carries the event id and key.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from onceflow.prove.errors import ProveError

# FUNCTION(n, rng) -> (key, value): record n of a user's input
RecordFactory = Callable[[int, random.Random], tuple[str, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class InputRecord:
    id: str
    key: str
    seq: int


def input_records(count: int, keys: int) -> Iterator[InputRecord]:
    seqs = [0] * keys
    for n in range(count):
        k = n % keys
        yield InputRecord(f"k{k}-{seqs[k]}", f"k{k}", seqs[k])
        seqs[k] += 1


def input_values(
    count: int, keys: int, factory: RecordFactory | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every input record as (Kafka key, JSON value): the built-in ones or the factory's."""
    if factory is None:
        for record in input_records(count, keys):
            yield record.key, asdict(record)  # {"id": ..., "key": ..., "seq": ...}
        return
    rng = random.Random(0)
    for n in range(count):
        try:
            key, value = factory(n, rng)
        except Exception as error:  # the user's generator: one line, theirs to read
            raise ProveError(f"the input generator failed at record {n}: "
                             f"{type(error).__name__}: {error}") from None  # fmt: skip
        if not isinstance(value, dict):
            raise ProveError(f"the input generator returned {type(value).__name__} for record "
                             f"{n}: expected (key, dict)")  # fmt: skip
        yield str(key), value


def produce_input(
    bootstrap: str,
    topic: str,
    count: int,
    keys: int,
    rate: float | None = None,
    cancel: threading.Event | None = None,
    factory: RecordFactory | None = None,
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
    for n, (key, value) in enumerate(input_values(count, keys, factory)):
        if cancel is not None and cancel.is_set():
            break
        if rate is not None:
            delay = started + n / rate - time.monotonic()
            if delay > 0:
                producer.flush(delay)  # sends what is due meanwhile
                time.sleep(max(0.0, started + n / rate - time.monotonic()))
        producer.produce(topic, json.dumps(value).encode(), key.encode(), on_delivery=delivered)
        producer.poll(0)
    if producer.flush(30) or failures:
        raise ProveError(f"could not write the input to {topic!r}: {failures[:1] or 'timeout'}")
    return count


class InputFeeder:
    """Writes the input at a steady rate in a background thread, so that a command-mode
    pipeline keeps making progress across its lives (kills land mid-stream)."""

    def __init__(
        self, bootstrap: str, topic: str, count: int, keys: int, rate: float,
        factory: RecordFactory | None = None,
    ) -> None:  # fmt: skip
        self.done = threading.Event()
        self._cancel = threading.Event()
        self.error: ProveError | None = None
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, count, keys, rate, factory), daemon=True
        )
        self._thread.start()

    def _run(
        self, bootstrap: str, topic: str, count: int, keys: int, rate: float,
        factory: RecordFactory | None,
    ) -> None:  # fmt: skip
        try:
            produce_input(bootstrap, topic, count, keys, rate, self._cancel, factory)
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
