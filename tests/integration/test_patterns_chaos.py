"""Exactly-once patterns under SIGKILL: workers killed at crash points, restarted, audited.

For each pattern a worker processes a few thousand events, is SIGKILLed several times (at
a random step of its flow, ONCEFLOW_CRASH_AT, or from outside at a random moment) and
restarted; then ``onceflow.verify`` audits that the database effects (and the output topic
where the pattern produces) hold every event exactly once, in per-key order. The
no-deduplication baseline, killed the same way, must show duplicates: the audit can fail.
Every database test runs on SQLite and on a throwaway PostgreSQL server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import zlib
from collections.abc import Callable

import pytest

from onceflow.db import LockTimeout, connect
from onceflow.patterns import offsets, relay
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.outbox import Outbox
from tests.integration.patterns_harness import (
    ROOT,
    audit_effects,
    audit_topic,
    create_topics,
    produce_events,
    read_dlq,
    relay_command,
    run_with_kills,
    worker_command,
)
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

EVENTS = 2000
INBOX_STEPS = ("after_consume", "after_begin", "before_db_commit", "after_db_commit",
               "after_produce", "after_kafka_commit")  # fmt: skip
DB_OFFSETS_STEPS = ("after_consume", *offsets.STEPS)
BASELINE_STEPS = ("after_db_commit", "after_produce")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    return request.getfixturevalue("postgres_url")


def _setup(bootstrap: str, runs: int) -> Callable[[int], None]:
    """Create the topics; return a ``before_each`` producing one wave of events per run."""
    create_topics(bootstrap, "input", "output", "dlq")
    wave = EVENTS // (runs + 1)

    def produce_wave(run: int) -> None:
        count = EVENTS - wave * runs if run == runs else wave
        produce_events(bootstrap, count, start=wave * run)

    return produce_wave


def _assert_exactly_once(report) -> None:
    assert report.input.events == EVENTS
    assert report.ok, f"anomalies: {report.counts} e.g. {report.anomalies[:5]}"


@pytest.mark.parametrize(
    ("mode", "steps"), [("db_offsets", DB_OFFSETS_STEPS), ("inbox", INBOX_STEPS)]
)
def test_pattern_is_exactly_once_under_kills(kafka_broker, db_url, tmp_path, mode, steps):
    bootstrap = kafka_broker.bootstrap
    kills = run_with_kills(
        worker_command(mode, bootstrap, db_url, "--idle-exit", "2", "--batch-size", "50"),
        steps,
        tmp_path / "worker.log",
        kills=6,
        before_each=_setup(bootstrap, 6),
        seed=zlib.crc32(f"{mode}{db_url[:6]}".encode()),
    )
    assert kills.kills >= 4, kills
    _assert_exactly_once(audit_effects(bootstrap, db_url))


def test_no_dedup_baseline_duplicates_under_kills(kafka_broker, db_url, tmp_path):
    bootstrap = kafka_broker.bootstrap
    kills = run_with_kills(
        worker_command("baseline", bootstrap, db_url, "--idle-exit", "2", "--batch-size", "50"),
        BASELINE_STEPS,
        tmp_path / "worker.log",
        kills=3,
        before_each=_setup(bootstrap, 3),
        external_every=0,
    )
    assert kills.kills == 3, kills
    report = audit_effects(bootstrap, db_url)
    assert report.counts.get("missing", 0) == 0
    assert report.counts.get("duplicated", 0) > 0, "the baseline should duplicate under kills"
    assert not report.ok


def test_inbox_outbox_and_relay_under_kills(kafka_broker, db_url, tmp_path):
    """Idempotent consumer + transactional outbox; the relay is killed too. The output
    topic has every event (first copies in per-key order); relay duplicates are what a
    downstream inbox removes."""
    bootstrap = kafka_broker.bootstrap
    run_with_kills(
        worker_command("inbox_outbox", bootstrap, db_url, "--idle-exit", "2", "--batch-size", "50"),
        INBOX_STEPS,
        tmp_path / "worker.log",
        kills=4,
        before_each=_setup(bootstrap, 4),
        seed=3,
    )
    _assert_exactly_once(audit_effects(bootstrap, db_url))
    relay_kills = run_with_kills(
        relay_command(bootstrap, db_url),
        tuple(s for s in relay.STEPS if s != "after_kafka_commit"),
        tmp_path / "relay.log",
        kills=5,
        max_count=4,
        seed=4,
    )
    assert relay_kills.kills >= 3, relay_kills
    report, removed = audit_topic(bootstrap, "output", dedupe=True)
    _assert_exactly_once(report)
    raw, _ = audit_topic(bootstrap, "output")
    assert raw.counts.get("missing", 0) == 0
    assert raw.counts.get("duplicated", 0) == removed


def test_poison_records_go_to_the_dead_letter_topic(kafka_broker, db_url, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, "input", "output", "dlq")
    events = produce_events(bootstrap, 1000, poison_every=50)
    run_with_kills(
        worker_command("db_offsets", bootstrap, db_url, "--idle-exit", "2"),
        DB_OFFSETS_STEPS,
        tmp_path / "worker.log",
        kills=0,
    )
    dead = read_dlq(bootstrap)
    assert len(dead) == 1000 - len(events) == 20
    for value, headers in dead:
        assert value.startswith(b"\xff not json")
        assert b"DecodeError" in headers["onceflow-error"]
        assert headers["onceflow-source"].startswith(b"input/")
    report = audit_effects(bootstrap, db_url)
    assert report.counts.get("missing", 0) == 0
    assert report.counts.get("duplicated", 0) == 0
    assert report.counts.get("unreadable", 0) == 20  # the poison records, in the input


def test_two_relays_share_the_outbox_on_postgresql(kafka_broker, request, tmp_path):
    """Two relay processes at once (FOR UPDATE SKIP LOCKED on key shards), both killed at
    random steps: every event published, first copies in per-key order."""
    pg_url = request.getfixturevalue("postgres_url")
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, "input", "output")
    events = produce_events(bootstrap, EVENTS)
    with connect(pg_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for event in events:
                outbox.add(tx, "output", event["key"], json.dumps(event))
    results: list[object] = []

    def relay_process(name: str, seed: int) -> None:
        try:
            results.append(
                run_with_kills(
                    relay_command(
                        bootstrap, pg_url, "--batch-size", "100", "--shards-per-cycle", "2"
                    ),
                    tuple(s for s in relay.STEPS if s != "after_kafka_commit"),
                    tmp_path / f"{name}.log",
                    kills=3,
                    max_count=3,
                    seed=seed,
                )
            )
        except BaseException as error:
            results.append(error)

    threads = [threading.Thread(target=relay_process, args=(f"relay{i}", i)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        assert not isinstance(result, BaseException), result
    report, _ = audit_topic(bootstrap, "output", dedupe=True)
    _assert_exactly_once(report)
    with connect(pg_url) as db:
        assert Outbox(db).backlog() == 0


def test_postgresql_partition_row_lock_blocks_the_next_owner(request):
    pg_url = request.getfixturevalue("postgres_url")
    first = connect(pg_url)
    second = connect(pg_url, lock_timeout_ms=300)
    store = OffsetStore(first, "g")
    store.create_schema()
    store.ensure_rows([("t", 0)])
    with first.transaction() as tx:
        store.lock(tx, "t", 0)
        store.store(tx, "t", 0, 7)
        with pytest.raises(LockTimeout), second.transaction() as tx2:
            OffsetStore(second, "g").lock(tx2, "t", 0)
    with second.transaction() as tx2:
        assert OffsetStore(second, "g").lock(tx2, "t", 0) == 7


@pytest.mark.parametrize("mode", ["db_offsets", "inbox"])
def test_two_workers_in_one_group_under_kills(kafka_broker, db_url, tmp_path, mode):
    """Two workers of one consumer group (rebalances hand partitions over while the other
    is killed at crash points): the database still holds every event exactly once."""
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, "input", "output", "dlq")
    results: list[object] = []

    def feed() -> None:  # events keep arriving while workers die and rebalance
        for wave in range(10):
            produce_events(bootstrap, EVENTS // 10, start=wave * EVENTS // 10)
            time.sleep(0.6)

    feeder = threading.Thread(target=feed)
    feeder.start()
    steps = DB_OFFSETS_STEPS if mode == "db_offsets" else INBOX_STEPS

    def worker(instance: str, seed: int) -> None:
        try:
            command = worker_command(mode, bootstrap, db_url, "--idle-exit", "4",
                                     "--batch-size", "50", "--instance", instance)  # fmt: skip
            results.append(run_with_kills(command, steps, tmp_path / f"{instance}.log",
                                          kills=3, max_count=3, seed=seed))  # fmt: skip
        except BaseException as error:
            results.append(error)

    threads = [threading.Thread(target=worker, args=(f"w{i}", 10 + i)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in [*threads, feeder]:
        thread.join()
    for result in results:
        assert not isinstance(result, BaseException), result
    assert sum(r.kills for r in results) >= 4, results
    # Whatever arrived last. w2 is a static member (group.instance.id) that left without
    # LeaveGroup, so it keeps its partitions until its 6 s session times out: the drain
    # must stay longer than that, or it exits caught up on its own partitions only.
    drain = worker_command(mode, bootstrap, db_url, "--idle-exit", "8", "--instance", "w1")
    run_with_kills(drain, steps, tmp_path / "drain.log", kills=0)
    _assert_exactly_once(audit_effects(bootstrap, db_url))


def test_sigterm_stops_gracefully_without_duplicates(kafka_broker, tmp_path):
    """SIGTERM finishes the batch and commits before leaving: even at_least_once then
    restarts without processing anything twice."""
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, "input", "output", "dlq")
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    produce_events(bootstrap, EVENTS)
    command = worker_command("baseline", bootstrap, db_url, "--idle-exit", "2",
                             "--batch-size", "20", "--slow-ms", "2")  # fmt: skip
    log_path = tmp_path / "worker.log"
    with open(log_path, "a") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        time.sleep(2.5)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        stats = json.loads(log_path.read_text().splitlines()[-1])["stats"]
        assert 0 < stats["processed"] < EVENTS, "stopped mid-stream"
        assert (
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=log, timeout=120).returncode == 0
        )
    _assert_exactly_once(audit_effects(bootstrap, db_url))


def test_transactional_relay_under_kills(kafka_broker, tmp_path):
    """The relay publishing each batch in a Kafka transaction (--transactional-id), killed
    at every kind of step, including between the Kafka commit and the database commit."""
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, "input", "output")
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    events = produce_events(bootstrap, EVENTS)
    with connect(db_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for event in events:
                outbox.add(tx, "output", event["key"], json.dumps(event))
    kills = run_with_kills(
        relay_command(bootstrap, db_url, "--transactional-id", "relay-1", "--batch-size", "100"),
        relay.STEPS,
        tmp_path / "relay.log",
        kills=5,
        max_count=4,
        seed=8,
    )
    assert kills.kills >= 3, kills
    report, _ = audit_topic(bootstrap, "output", dedupe=True)
    _assert_exactly_once(report)
