"""The workload: transactional producers and read_committed consumers while the broker is
SIGKILLed and restarted, recorded as a ``History``."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceflow.producing import abort_transaction, produce_waiting
from onceflow.verify.jepsen.history import ABORTED, COMMITTED, INDETERMINATE, History, Read, Txn


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
