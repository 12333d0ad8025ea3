"""Helpers for the pattern tests: topics, events, workers killed at crash points, audits.

The audit itself is ``onceflow.verify`` (``run_verify``): every input event must appear
exactly once in each output, never from an aborted transaction, in per-key order.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from confluent_kafka import KafkaException, Producer

from onceflow.faults.process import ProcessGroup
from onceflow.faults.results import Limits, RunError
from onceflow.faults.run import FaultRun
from onceflow.faults.schedule import TIME, Fault, Schedule
from onceflow.verify.audit import InputEvent, first_copies
from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.run import run_verify
from onceflow.verify.sources import read_input, read_output_topic
from tests.kit.engines import PARTITIONS, Engine

ROOT = Path(__file__).resolve().parents[2]
KEYS = 24
EFFECTS_QUERY = "SELECT event_id AS id, key FROM effects ORDER BY seq"
T = TypeVar("T")


def produce_events(engine: Engine, count: int, poison_every: int = 0, start: int = 0) -> list[dict]:
    """JSON events {"id": "e<n>", "key": "k<n % KEYS>", "n": n} to the engine's input
    (acks=all, idempotent); every ``poison_every``-th record is replaced by an undecodable
    value (not counted as an event)."""
    topic = engine.input
    producer = Producer({"bootstrap.servers": engine.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
    events = []
    for n in range(start, start + count):
        key = f"k{n % KEYS}"
        if poison_every and n % poison_every == poison_every - 1:
            producer.produce(topic, key=key.encode(), value=b"\xff not json {" + str(n).encode())
        else:
            event = {"id": f"e{n}", "key": key, "n": n}
            events.append(event)
            producer.produce(topic, key=key.encode(), value=json.dumps(event).encode())
        if n % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return events


@dataclass
class KillLog:
    kills: int = 0
    crash_points: list[str] = field(default_factory=list)
    external_kills: int = 0


def kill_schedule(
    steps: tuple[str, ...], kills: int, seed: int, max_count: int, external_every: int
) -> Schedule:
    """``kills`` faults, one per life: a random step's N-th occurrence, every
    ``external_every``-th a SIGKILL from outside 1 to 3.5 s into the life instead."""
    rng = random.Random(seed)
    schedule = []
    for attempt in range(kills):
        if external_every and attempt % external_every == external_every - 1:
            schedule.append(Fault(TIME, round(rng.uniform(1.0, 3.5) * 1000)))
        else:
            schedule.append(Fault(rng.choice(steps), rng.randint(1, max_count)))
    return tuple(schedule)


def run_with_kills(
    command: list[str],
    steps: tuple[str, ...],
    log_path: Path,
    *,
    kills: int = 5,
    seed: int = 1,
    max_count: int = 6,
    external_every: int = 3,
    timeout: float = 120.0,
    before_each: Callable[[int], None] | None = None,
) -> KillLog:
    """Run ``command`` with the fault engine through ``kills`` lives, each armed at a random
    step (ONCEFLOW_CRASH_AT) or, every ``external_every``-th, SIGKILLed from outside at a
    random moment; then unarmed until it exits 0 (idle). A life that exits 0 before its
    kill lands is not counted. ``before_each(run)`` is called before every life (0 ..
    kills), e.g. to produce the next wave of events so each life has work."""

    def start(_worker: int, _life: int, arming: dict[str, str]) -> ProcessGroup:
        return ProcessGroup(command, log_path, env={**os.environ, **arming}, cwd=ROOT)

    schedule = kill_schedule(steps, kills, seed, max_count, external_every)
    run = FaultRun(
        start, schedule, log_path.parent, until="exit", restart_crashed=False,
        limits=Limits(timeout_s=timeout * (kills + 1)),
        before_life=(lambda _worker, life: before_each(life - 1)) if before_each else None,
    )  # fmt: skip
    try:
        result = run.run()
    except RunError as error:
        raise AssertionError(f"{error}; see {log_path}") from None
    landed = result.landed
    return KillLog(len(landed), [str(f) if f.trigger != TIME else "external" for f in landed],
                   sum(f.trigger == TIME for f in landed))  # fmt: skip


def produce_in_waves(engine: Engine, total: int, runs: int) -> Callable[[int], None]:
    """A ``before_each`` for run_with_kills: ``total`` events in ``runs + 1`` waves, one
    produced before each run (the last run's wave takes the remainder)."""
    wave = total // (runs + 1)

    def produce_wave(run: int) -> None:
        produce_events(engine, total - wave * runs if run == runs else wave, start=wave * run)

    return produce_wave


def feed_events(engine: Engine, total: int, waves: int = 10, pause_s: float = 0.6) -> None:
    """Produce ``total`` events in ``waves`` waves, ``pause_s`` apart (while workers run)."""
    for wave in range(waves):
        produce_events(engine, total // waves, start=wave * total // waves)
        time.sleep(pause_s)


def run_concurrently(*calls: Callable[[], T]) -> list[T]:
    """Run every call in its own thread at once; their results, in order, once all have
    ended (the first exception of any is raised then)."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
    return [future.result() for future in futures]


def worker_command(mode: str, engine: Engine, db_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.integration.pattern_worker", mode, engine.bootstrap,
            db_url, *engine.worker_args(), *extra]  # fmt: skip


def relay_command(engine: Engine, db_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "onceflow", "relay", "--database-url", db_url,
            "--bootstrap", engine.bootstrap, "--idle-exit", "2", "--batch-size", "200",
            "--lease-ttl-ms", "3000", *extra]  # fmt: skip


def audit_effects(engine: Engine, db_url: str) -> AuditReport:
    return run_verify(
        engine.bootstrap, engine.input, id_field="id", key_field="key", database_url=db_url,
        query=EFFECTS_QUERY,
    )  # fmt: skip


def audit_topic(engine: Engine, dedupe: bool = False):
    """Audit an output topic (read_committed). With ``dedupe``, later copies of an event
    are removed first, the way a downstream inbox would; returns (report, copies removed)."""
    extractor = Extractor("id", "key")
    source = read_input(engine.bootstrap, engine.input, extractor, 60)
    sink = read_output_topic(engine.bootstrap, engine.output, extractor, timeout=60)
    removed = 0
    if dedupe:
        # Each event is one outbox row here, so its relay copies share the event id (and
        # the onceflow-outbox-id header): keeping the first copy is what an inbox does.
        sink, removed = first_copies(sink)
    return source.audit([sink]), removed


def input_events(engine: Engine) -> list[InputEvent]:
    return read_input(engine.bootstrap, engine.input, Extractor("id", "key"), 60).events


def read_dlq(engine: Engine) -> list[tuple[bytes | None, dict[str, bytes]]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": engine.bootstrap,
            "group.id": "dlq-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    records = []
    try:
        consumer.assign([TopicPartition(engine.dlq, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.3):
                if message.error() is None:
                    records.append((message.value(), dict(message.headers() or [])))
    finally:
        consumer.close()
    return records


def kafka_transactions_supported(bootstrap: str) -> str | None:
    """None when the broker runs confluent-kafka transactions; else the reason it cannot."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "probe-txn"})
    try:
        producer.init_transactions(8)
    except KafkaException as error:
        return str(error.args[0])
    return None


def group_offsets_supported(engine: Engine) -> str | None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": engine.bootstrap, "group.id": "probe-group"})
    try:
        consumer.committed([TopicPartition(engine.input, 0)], timeout=5)
    except KafkaException as error:
        return str(error.args[0])
    finally:
        consumer.close()
    return None
