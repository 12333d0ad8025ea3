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


def producer(bootstrap: str) -> Any:
    """The idempotent producer that writes the input (acks=all)."""
    from confluent_kafka import Producer

    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
         "log_level": 0}
    )  # fmt: skip


def produce_input(
    bootstrap: str, topic: str, count: int, keys: int, factory: RecordFactory | None = None
) -> int:
    """Write every record at once; returns how many were written."""
    feeder = InputFeeder(bootstrap, topic, count, keys, factory)
    feeder.allow(None)
    feeder.stop(wait=True)
    return count


class InputFeeder:
    """Writes the input in a background thread, never more records than ``allow()`` lets
    it (the fault run paces the input by the pipeline's progress, so that the input lasts
    until every planned fault had its chance); ``allow(None)`` lets the rest go."""

    def __init__(
        self, bootstrap: str, topic: str, count: int, keys: int,
        factory: RecordFactory | None = None,
    ) -> None:  # fmt: skip
        self.count = count
        self.written = 0
        self.done = threading.Event()
        self.error: ProveError | None = None
        self._allowed = 0
        self._changed = threading.Condition()
        self._cancelled = False
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, keys, factory), daemon=True,
            name="onceflow-prove-feeder",
        )  # fmt: skip
        self._thread.start()

    def allow(self, records: int | None) -> None:
        """Let the feeder write up to ``records`` records in all (None: every one)."""
        allowed = self.count if records is None else min(self.count, records)
        if allowed > self._allowed:
            with self._changed:
                self._allowed = allowed
                self._changed.notify()

    def _run(self, bootstrap: str, topic: str, keys: int, factory: RecordFactory | None) -> None:
        failures: list[str] = []

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        try:
            out = producer(bootstrap)
            for key, value in input_values(self.count, keys, factory):
                with self._changed:
                    while self.written >= self._allowed and not self._cancelled:
                        out.poll(0)
                        self._changed.wait(0.05)
                    if self._cancelled:
                        break
                out.produce(topic, json.dumps(value).encode(), key.encode(),
                            on_delivery=delivered)  # fmt: skip
                self.written += 1
                if self.written >= self._allowed:
                    out.flush(5)  # what is allowed goes out now, not after linger.ms
                out.poll(0)
            if out.flush(30) or failures:
                self.error = ProveError(f"could not write the input to {topic!r}: "
                                        f"{failures[:1] or 'timeout'}")  # fmt: skip
        except ProveError as error:
            self.error = error
        finally:
            self.done.set()

    @property
    def finished(self) -> bool:
        """Every record was written and acknowledged."""
        return self.done.is_set() and self.written == self.count and self.error is None

    def stop(self, wait: bool = False) -> None:
        """Stop writing (``wait``: finish what is allowed first); raise its error."""
        if not wait:
            with self._changed:
                self._cancelled = True
                self._changed.notify()
        self._thread.join()
        if self.error is not None:
            raise self.error
