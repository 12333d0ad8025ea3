"""A Jepsen-style check of a broker's transactions: history, workload and checker.

The workload runs concurrent transactional producers (distinct ``transactional.id``s)
writing unique values to a multi-partition topic, aborting some transactions on purpose,
while read_committed consumers poll and the broker is SIGKILLed and restarted. Every
operation is recorded in a ``History``:

* ``Txn`` — one transaction: the (partition, value) pairs it produced, in order, and its
  outcome: ``committed`` (``commit_transaction`` returned), ``aborted`` (the producer
  chose to abort, or failed before asking to commit: no commit was ever requested), or
  ``indeterminate`` (the commit was requested but the call failed, e.g. the broker died).
* ``Read`` — one record a consumer received: consumer, partition, offset, value.
* ``final`` — the read_committed content of the topic after the run, once every
  transaction is decided (the last stable offset has reached the high watermark).

``check`` is pure: it takes a history and returns every violation of these rules:

* ``aborted_read``: no value of an aborted transaction is ever read.
* ``lost_write``: every value of a committed transaction is in the final read.
* ``duplicate``: a value is in the final read at most once, and a consumer reads a value
  at one offset only.
* ``nonmonotonic_offset``: each consumer's offsets increase strictly per partition.
* ``order``: in each partition, each producer's committed values keep the order in which
  they were produced.
* ``partial_indeterminate``: an indeterminate transaction is entirely visible or entirely
  invisible.
* ``unstable_read``: a record a consumer read is at the same offset in the final read
  (reading data that a crash later loses is a violation).
* ``wrong_partition`` / ``unknown_value``: values appear only where they were written.
* ``stuck``: the last stable offset never reached the high watermark (a transaction that
  was never decided).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onceflow.producing import abort_transaction, produce_waiting

COMMITTED = "committed"
ABORTED = "aborted"
INDETERMINATE = "indeterminate"

VIOLATIONS = (
    "aborted_read",
    "lost_write",
    "duplicate",
    "nonmonotonic_offset",
    "order",
    "partial_indeterminate",
    "unstable_read",
    "wrong_partition",
    "unknown_value",
    "stuck",
    "invalid_run",
)


@dataclass(slots=True)
class Txn:
    producer: str
    index: int
    writes: list[tuple[int, str]]  # (partition, value) in production order
    outcome: str = INDETERMINATE
    started: float = 0.0
    ended: float = 0.0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Read:
    consumer: str
    partition: int
    offset: int
    value: str
    at: float = 0.0


@dataclass(slots=True)
class History:
    txns: list[Txn] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    final: list[Read] = field(default_factory=list)  # consumer "final"
    final_complete: bool = True  # False: LSO never reached the high watermark
    events: list[dict[str, Any]] = field(default_factory=list)  # kills, restarts, errors

    def save(self, path: Path) -> None:
        """One JSON object per line: txns, reads, final records, events."""
        with open(path, "w") as out:
            for kind, items in (
                ("txn", self.txns),
                ("read", self.reads),
                ("final", self.final),
            ):
                for item in items:
                    out.write(json.dumps({"type": kind, **asdict(item)}) + "\n")
            for event in self.events:
                out.write(json.dumps({"type": "event", **event}) + "\n")
            out.write(json.dumps({"type": "final_complete", "value": self.final_complete}))
            out.write("\n")


@dataclass(slots=True)
class CheckResult:
    violations: dict[str, list[dict[str, Any]]]
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def summary(self, limit: int = 5) -> str:
        lines = [json.dumps(self.stats, sort_keys=True)]
        for kind in VIOLATIONS:
            found = self.violations.get(kind, [])
            if found:
                lines.append(f"{kind}: {len(found)}, e.g. {found[:limit]}")
        return "\n".join(lines)


def _sequence(value: str) -> int:
    return int(value.rsplit(":", 1)[1])


def check(history: History) -> CheckResult:
    """Every violation of the rules in the module docstring (empty lists: none)."""
    violations: dict[str, list[dict[str, Any]]] = {kind: [] for kind in VIOLATIONS}
    written: dict[str, tuple[Txn, int]] = {}  # value -> (txn, partition)
    for txn in history.txns:
        for partition, value in txn.writes:
            written[value] = (txn, partition)

    for event in history.events:
        if event.get("kind") == "worker_failed":
            violations["invalid_run"].append(event)
    if not history.final_complete:
        violations["stuck"].append({"detail": "last stable offset never reached the end"})

    # Final read: duplicates, placement, aborted data.
    final_at: dict[tuple[int, int], str] = {}
    final_count: Counter[str] = Counter()
    for record in history.final:
        final_at[(record.partition, record.offset)] = record.value
        final_count[record.value] += 1
    for value, count in final_count.items():
        if count > 1:
            violations["duplicate"].append({"value": value, "copies": count, "where": "final"})

    all_reads = [*history.reads, *history.final]
    for record in all_reads:
        origin = written.get(record.value)
        if origin is None:
            violations["unknown_value"].append(asdict(record))
            continue
        txn, partition = origin
        if partition != record.partition:
            violations["wrong_partition"].append({**asdict(record), "written_to": partition})
        if txn.outcome == ABORTED:
            violations["aborted_read"].append(
                {**asdict(record), "txn": f"{txn.producer}#{txn.index}"}
            )

    # Committed values are all there; indeterminate ones all or nothing.
    for txn in history.txns:
        visible = [value for _, value in txn.writes if final_count[value]]
        if txn.outcome == COMMITTED and len(visible) < len(txn.writes):
            for partition, value in txn.writes:
                if not final_count[value]:
                    violations["lost_write"].append(
                        {
                            "value": value,
                            "partition": partition,
                            "txn": f"{txn.producer}#{txn.index}",
                        }
                    )
        elif txn.outcome == INDETERMINATE and 0 < len(visible) < len(txn.writes):
            violations["partial_indeterminate"].append(
                {
                    "txn": f"{txn.producer}#{txn.index}",
                    "visible": len(visible),
                    "written": len(txn.writes),
                    "error": txn.error,
                }
            )

    # Consumers: monotonic offsets, one offset per value, reads that stay true.
    last_offset: dict[tuple[str, int], int] = {}
    seen_at: dict[tuple[str, str], int] = {}
    for record in history.reads:
        position = (record.consumer, record.partition)
        previous = last_offset.get(position)
        if previous is not None and record.offset <= previous:
            violations["nonmonotonic_offset"].append({**asdict(record), "previous": previous})
        last_offset[position] = record.offset
        where = seen_at.setdefault((record.consumer, record.value), record.offset)
        if where != record.offset:
            violations["duplicate"].append(
                {**asdict(record), "first_offset": where, "where": "consumer"}
            )
        if history.final_complete:
            final_value = final_at.get((record.partition, record.offset))
            if final_value != record.value:
                violations["unstable_read"].append({**asdict(record), "final": final_value})

    # Per-partition order of each producer's values in the final log.
    last_sequence: dict[tuple[str, int], tuple[int, str]] = {}
    for record in sorted(history.final, key=lambda r: (r.partition, r.offset)):
        origin = written.get(record.value)
        if origin is None:
            continue
        key = (origin[0].producer, record.partition)
        sequence = _sequence(record.value)
        before = last_sequence.get(key)
        if before is not None and sequence <= before[0]:
            violations["order"].append({**asdict(record), "after": before[1]})
        else:
            last_sequence[key] = (sequence, record.value)

    outcomes = Counter(txn.outcome for txn in history.txns)
    indeterminate_visible = sum(
        1
        for txn in history.txns
        if txn.outcome == INDETERMINATE and any(final_count[v] for _, v in txn.writes)
    )
    stats = {
        "txns": len(history.txns),
        COMMITTED: outcomes[COMMITTED],
        ABORTED: outcomes[ABORTED],
        INDETERMINATE: outcomes[INDETERMINATE],
        "indeterminate_visible": indeterminate_visible,
        "values_written": len(written),
        "consumer_reads": len(history.reads),
        "final_records": len(history.final),
        "events": [event["kind"] for event in history.events if "kind" in event],
    }
    return CheckResult(violations, stats)


# --------------------------------------------------------------------------- workload


@dataclass(slots=True)
class WorkloadConfig:
    topic: str = "jepsen"
    partitions: int = 4
    producers: int = 3
    consumers: int = 2
    duration: float = 36.0
    kills: int = 3
    down_time: float = 1.0  # seconds the broker stays dead
    max_txn_size: int = 6
    abort_probability: float = 0.3
    seed: int = 42
    # The first ``impatient_producers`` give commit_transaction a short timeout and do not
    # retry it: a commit in flight when the broker dies becomes indeterminate, and the
    # producer is replaced by a new one with the same transactional.id (fencing the old).
    impatient_producers: int = 1
    impatient_commit_timeout: float = 0.3
    transaction_timeout_ms: int = 10_000
    settle_timeout: float = 60.0  # for the LSO to reach the end after the run


class _Log:
    """Thread-safe appends to the history."""

    def __init__(self, history: History, started: float) -> None:
        self.history = history
        self.started = started
        self.lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.started, 4)

    def txn(self, txn: Txn) -> None:
        with self.lock:
            self.history.txns.append(txn)

    def reads(self, reads: list[Read]) -> None:
        with self.lock:
            self.history.reads.extend(reads)

    def event(self, **event: Any) -> None:
        with self.lock:
            self.history.events.append({"at": self.now(), **event})


def _producer_config(bootstrap: str, transactional_id: str, config: WorkloadConfig) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": config.transaction_timeout_ms,
        "message.timeout.ms": config.transaction_timeout_ms,
        "linger.ms": 2,
        "retry.backoff.ms": 50,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "socket.connection.setup.timeout.ms": 2000,
    }


def _run_producer(
    name: str,
    bootstrap: str,
    config: WorkloadConfig,
    rng: random.Random,
    log: _Log,
    stop: threading.Event,
    impatient: bool,
) -> None:
    from confluent_kafka import KafkaException, Producer

    sequence = 0
    index = 0
    producer = None
    while not stop.is_set():
        if producer is None:
            producer = Producer(_producer_config(bootstrap, name, config))
            try:
                producer.init_transactions(10)
            except KafkaException as error:
                log.event(kind="init_failed", producer=name, error=str(error.args[0]))
                producer = None
                time.sleep(0.2)
                continue
        size = rng.randint(1, config.max_txn_size)
        writes = []
        for _ in range(size):
            writes.append((rng.randrange(config.partitions), f"{name}:{sequence}"))
            sequence += 1
        wants_abort = rng.random() < config.abort_probability
        txn = Txn(name, index, writes, started=log.now())
        index += 1
        commit_requested = False
        try:
            producer.begin_transaction()
            for partition, value in writes:
                produce_waiting(producer, config.topic, value=value.encode(), partition=partition)
            producer.poll(0)
            if wants_abort:
                abort_transaction(producer, 15)
                txn.outcome = ABORTED
            else:
                commit_requested = True
                if impatient:
                    producer.commit_transaction(config.impatient_commit_timeout)
                else:
                    _commit(producer)
                txn.outcome = COMMITTED
        except KafkaException as error:
            kafka_error = error.args[0]
            txn.error = str(kafka_error)
            txn.outcome = INDETERMINATE if commit_requested else ABORTED
            if kafka_error.txn_requires_abort():
                try:
                    abort_transaction(producer, 15)
                except KafkaException as abort_error:
                    txn.error += f"; abort failed: {abort_error.args[0]}"
                    producer = None
            else:  # fatal, or retriable and still failing: start a new producer (fences)
                producer = None
        txn.ended = log.now()
        log.txn(txn)
    if producer is not None:
        producer.flush(5)


def _commit(producer: Any, attempts: int = 5) -> None:
    """commit_transaction, retried while librdkafka says the error is retriable."""
    from confluent_kafka import KafkaException

    for attempt in range(attempts):
        try:
            producer.commit_transaction(15)
            return
        except KafkaException as error:
            if not error.args[0].retriable() or attempt == attempts - 1:
                raise
            time.sleep(0.2)


def _run_consumer(
    name: str, bootstrap: str, config: WorkloadConfig, log: _Log, stop: threading.Event
) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"jepsen-{name}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(config.topic, p, 0) for p in range(config.partitions)])
    try:
        while not stop.is_set():
            batch = []
            for message in consumer.consume(500, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.event(kind="consumer_error", consumer=name, error=str(error))
                    continue
                batch.append(
                    Read(
                        name,
                        message.partition(),
                        message.offset(),
                        message.value().decode(),
                        log.now(),
                    )
                )
            log.reads(batch)
    finally:
        consumer.close()


def _guarded(target: Callable[..., None], log: _Log) -> Callable[..., None]:
    """Run a worker; an exception is recorded (the run is then invalid), not lost."""

    def run(*args: Any) -> None:
        try:
            target(*args)
        except BaseException as error:
            log.event(kind="worker_failed", worker=args[0], error=repr(error))
            raise

    return run


def run_workload(
    broker: Any,
    config: WorkloadConfig,
    *,
    on_event: Callable[[str], None] | None = None,
) -> History:
    """Run the workload against ``broker`` (a ``onceflow.testing.BrokerProcess`` or
    anything with ``bootstrap``, ``kill()`` and ``start()``) and return its history.

    The topic must exist with ``config.partitions`` partitions. Kills happen at fixed
    fractions of the run, jittered by the seed.
    """
    from onceflow.verify.sources import READ_COMMITTED, read_topic, topic_ranges

    history = History()
    log = _Log(history, time.monotonic())
    stop = threading.Event()
    bootstrap = broker.bootstrap
    master = random.Random(config.seed)
    threads = [
        threading.Thread(
            target=_guarded(_run_producer, log),
            args=(
                f"p{i}",
                bootstrap,
                config,
                random.Random(master.random()),
                log,
                stop,
                i < config.impatient_producers,
            ),
            name=f"jepsen-p{i}",
            daemon=True,
        )
        for i in range(config.producers)
    ] + [
        threading.Thread(
            target=_guarded(_run_consumer, log),
            args=(f"c{i}", bootstrap, config, log, stop),
            name=f"jepsen-c{i}",
            daemon=True,
        )
        for i in range(config.consumers)
    ]
    kill_times = sorted(
        config.duration * (k + 1) / (config.kills + 1) + master.uniform(-1.0, 1.0)
        for k in range(config.kills)
    )
    for thread in threads:
        thread.start()
    started = time.monotonic()
    try:
        for kill_at in kill_times:
            time.sleep(max(0.0, started + kill_at - time.monotonic()))
            broker.kill()
            log.event(kind="kill")
            if on_event:
                on_event("kill")
            time.sleep(config.down_time)
            broker.start()
            log.event(kind="restart")
            if on_event:
                on_event("restart")
        time.sleep(max(0.0, started + config.duration - time.monotonic()))
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    log.event(kind="stopped")

    # Wait until every transaction is decided, then read everything committed.
    deadline = time.monotonic() + config.settle_timeout
    ranges = topic_ranges(broker.bootstrap, config.topic)
    while any(r.stable < r.high for r in ranges.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        ranges = topic_ranges(broker.bootstrap, config.topic)
    history.final_complete = all(r.stable >= r.high for r in ranges.values())
    log.event(
        kind="settled",
        complete=history.final_complete,
        ranges={str(p): [r.start, r.stable, r.high] for p, r in ranges.items()},
    )
    history.final = [
        Read("final", record.partition, record.offset, (record.value or b"").decode())
        for record in read_topic(broker.bootstrap, config.topic, ranges, READ_COMMITTED)
    ]
    return history
