"""Exactly-once patterns under SIGKILL: workers killed at crash points, restarted, audited.

For each pattern a worker processes a few thousand events, is SIGKILLed several times (at
a random step of its flow, ONCEFLOW_CRASH_AT, or from outside at a random moment) and
restarted; then ``onceflow.verify`` audits that the database effects (and the output topic
where the pattern produces) hold every event exactly once, in per-key order. The
no-deduplication baseline, killed the same way, must show duplicates: the audit can fail.
Every database test runs on SQLite and on a throwaway PostgreSQL server.

Engines (tests/integration/engines.py): every test runs on onceflow's embedded broker; one
representative case per pattern also runs on the shared 3-node Apache Kafka cluster (topics
with replication factor 3, min.insync.replicas=2), with fewer kills. ONCEFLOW_STRESS=1
(``make stress``) adds the PostgreSQL cases and the full number of kills on the cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
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
    KillLog,
    audit_effects,
    audit_topic,
    feed_events,
    produce_events,
    produce_in_waves,
    read_dlq,
    relay_command,
    run_concurrently,
    run_with_kills,
    worker_command,
)
from tests.kit.engines import APACHE_KAFKA, ONCEFLOW, Engine, on_apache_kafka
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

EVENTS = 2000
INBOX_STEPS = ("after_consume", "after_begin", "before_db_commit", "after_db_commit",
               "after_produce", "after_kafka_commit")  # fmt: skip
DB_OFFSETS_STEPS = ("after_consume", *offsets.STEPS)
BASELINE_STEPS = ("after_db_commit", "after_produce")
STRESS = os.environ.get("ONCEFLOW_STRESS") == "1"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    return request.getfixturevalue("postgres_url")


def _kills(engine: Engine, full: int) -> int:
    """Worker runs to kill: fewer on the cluster (each run joins a replicated group)."""
    return full if engine.name == ONCEFLOW or STRESS else max(2, full // 2)


STRESS_ONLY = pytest.mark.skipif(not STRESS, reason="make stress (ONCEFLOW_STRESS=1)")


def _cases(*values, kafka_dbs=("sqlite",), postgresql_in_stress=False):
    """Each ``values`` tuple on onceflow with both databases (PostgreSQL only under
    ONCEFLOW_STRESS with ``postgresql_in_stress``: the chaos matrix's PostgreSQL cells
    cover it in make test), and on Apache Kafka with ``kafka_dbs`` (and PostgreSQL too
    under ONCEFLOW_STRESS)."""
    dbs = ("sqlite", "postgresql") if STRESS else kafka_dbs
    cases = []
    for row in values:
        name = "-".join([*row[:1], ""])
        for db in ("sqlite", "postgresql"):
            marks = [STRESS_ONLY] if db == "postgresql" and postgresql_in_stress else []
            cases.append(pytest.param(*row, db, ONCEFLOW, id=f"{name}{db}-{ONCEFLOW}", marks=marks))
        cases += [
            on_apache_kafka(*row, db, APACHE_KAFKA, id=f"{name}{db}-{APACHE_KAFKA}") for db in dbs
        ]
    return cases


def _setup(engine: Engine, runs: int) -> Callable[[int], None]:
    """Create the topics; return a ``before_each`` producing one wave of events per run."""
    engine.create_topics()
    return produce_in_waves(engine, EVENTS, runs)


def _assert_exactly_once(report) -> None:
    assert report.input.events == EVENTS
    assert report.ok, f"anomalies: {report.counts} e.g. {report.anomalies[:5]}"


@pytest.mark.parametrize(
    ("mode", "steps", "db_url", "engine"),
    # on PostgreSQL in make test: tests/integration/test_chaos.py::test_matrix_on_postgresql
    # (runner/db_offsets, runner/inbox killed at their steps)
    _cases(("db_offsets", DB_OFFSETS_STEPS), ("inbox", INBOX_STEPS), postgresql_in_stress=True),
    indirect=["db_url", "engine"],
)
def test_pattern_is_exactly_once_under_kills(engine, db_url, tmp_path, mode, steps):
    runs = _kills(engine, 6)
    kills = run_with_kills(
        worker_command(mode, engine, db_url, "--idle-exit", "2", "--batch-size", "50"),
        steps,
        tmp_path / "worker.log",
        kills=runs,
        before_each=_setup(engine, runs),
        seed=zlib.crc32(f"{mode}{db_url[:6]}".encode()),
    )
    assert kills.kills >= runs * 2 // 3, kills
    _assert_exactly_once(audit_effects(engine, db_url))


@pytest.mark.parametrize(("db_url", "engine"), _cases(()), indirect=True)
def test_no_dedup_baseline_duplicates_under_kills(engine, db_url, tmp_path):
    kills = run_with_kills(
        worker_command("baseline", engine, db_url, "--idle-exit", "2", "--batch-size", "50"),
        BASELINE_STEPS,
        tmp_path / "worker.log",
        kills=3,
        before_each=_setup(engine, 3),
        external_every=0,
    )
    assert kills.kills == 3, kills
    report = audit_effects(engine, db_url)
    assert report.counts.get("missing", 0) == 0
    assert report.counts.get("duplicated", 0) > 0, "the baseline should duplicate under kills"
    assert not report.ok


# on PostgreSQL in make test: test_matrix_on_postgresql (article/idempotent_consumer_outbox)
# and test_two_relays_share_the_outbox_on_postgresql
@pytest.mark.parametrize(("db_url", "engine"), _cases((), postgresql_in_stress=True), indirect=True)
def test_inbox_outbox_and_relay_under_kills(engine, db_url, tmp_path):
    """Idempotent consumer + transactional outbox; the relay is killed too. The output
    topic has every event (first copies in per-key order); relay duplicates are what a
    downstream inbox removes."""
    runs = _kills(engine, 4)
    run_with_kills(
        worker_command("inbox_outbox", engine, db_url, "--idle-exit", "2", "--batch-size", "50"),
        INBOX_STEPS,
        tmp_path / "worker.log",
        kills=runs,
        before_each=_setup(engine, runs),
        seed=3,
    )
    _assert_exactly_once(audit_effects(engine, db_url))
    relay_runs = _kills(engine, 5)
    relay_kills = run_with_kills(
        relay_command(engine, db_url),
        tuple(s for s in relay.STEPS if s != "after_kafka_commit"),
        tmp_path / "relay.log",
        kills=relay_runs,
        max_count=4,
        seed=4,
    )
    assert relay_kills.kills >= relay_runs // 2 + 1, relay_kills
    report, removed = audit_topic(engine, dedupe=True)
    _assert_exactly_once(report)
    raw, _ = audit_topic(engine)
    assert raw.counts.get("missing", 0) == 0
    assert raw.counts.get("duplicated", 0) == removed


def test_poison_records_go_to_the_dead_letter_topic(engine, db_url, tmp_path):
    engine.create_topics()
    events = produce_events(engine, 1000, poison_every=50)
    run_with_kills(
        worker_command("db_offsets", engine, db_url, "--idle-exit", "2"),
        DB_OFFSETS_STEPS,
        tmp_path / "worker.log",
        kills=0,
    )
    dead = read_dlq(engine)
    assert len(dead) == 1000 - len(events) == 20
    for value, headers in dead:
        assert value.startswith(b"\xff not json")
        assert b"DecodeError" in headers["onceflow-error"]
        assert headers["onceflow-source"].startswith(f"{engine.input}/".encode())
    report = audit_effects(engine, db_url)
    assert report.counts.get("missing", 0) == 0
    assert report.counts.get("duplicated", 0) == 0
    assert report.counts.get("unreadable", 0) == 20  # the poison records, in the input


def test_two_relays_share_the_outbox_on_postgresql(engine, request, tmp_path):
    """Two relay processes at once (FOR UPDATE SKIP LOCKED on key shards), both killed at
    random steps: every event published, first copies in per-key order."""
    pg_url = request.getfixturevalue("postgres_url")
    engine.create_topics()
    events = produce_events(engine, EVENTS)
    with connect(pg_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for event in events:
                outbox.add(tx, engine.output, event["key"], json.dumps(event))

    def relay_process(name: str, seed: int) -> Callable[[], KillLog]:
        return lambda: run_with_kills(
            relay_command(engine, pg_url, "--batch-size", "100", "--shards-per-cycle", "2"),
            tuple(s for s in relay.STEPS if s != "after_kafka_commit"),
            tmp_path / f"{name}.log",
            kills=3,
            max_count=3,
            seed=seed,
        )

    run_concurrently(relay_process("relay1", 1), relay_process("relay2", 2))
    report, _ = audit_topic(engine, dedupe=True)
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


@pytest.mark.parametrize(
    ("db_url", "mode"),
    [
        ("postgresql", "db_offsets"),  # the offset rows' locks
        ("sqlite", "inbox"),
        pytest.param("sqlite", "db_offsets", marks=STRESS_ONLY),
        pytest.param("postgresql", "inbox", marks=STRESS_ONLY),
    ],
    indirect=["db_url"],
)
def test_two_workers_in_one_group_under_kills(engine, db_url, tmp_path, mode):
    """Two workers of one consumer group (rebalances hand partitions over while the other
    is killed at crash points): the database still holds every event exactly once."""
    engine.create_topics()
    steps = DB_OFFSETS_STEPS if mode == "db_offsets" else INBOX_STEPS

    def worker(instance: str, seed: int) -> Callable[[], KillLog]:
        command = worker_command(mode, engine, db_url, "--idle-exit", "4",
                                 "--batch-size", "50", "--instance", instance)  # fmt: skip
        return lambda: run_with_kills(command, steps, tmp_path / f"{instance}.log",
                                      kills=3, max_count=3, seed=seed)  # fmt: skip

    # events keep arriving while workers die and rebalance
    _, *results = run_concurrently(
        lambda: feed_events(engine, EVENTS), worker("w1", 11), worker("w2", 12)
    )
    assert sum(r.kills for r in results) >= 4, results
    # Whatever arrived last. w2 is a static member (group.instance.id) that left without
    # LeaveGroup, so it keeps its partitions until its 6 s session times out: the drain
    # must stay longer than that, or it exits caught up on its own partitions only.
    drain = worker_command(mode, engine, db_url, "--idle-exit", "8", "--instance", "w1")
    run_with_kills(drain, steps, tmp_path / "drain.log", kills=0)
    _assert_exactly_once(audit_effects(engine, db_url))


def test_sigterm_stops_gracefully_without_duplicates(engine, tmp_path):
    """SIGTERM finishes the batch and commits before leaving: even at_least_once then
    restarts without processing anything twice."""
    engine.create_topics()
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    produce_events(engine, EVENTS)
    command = worker_command("baseline", engine, db_url, "--idle-exit", "2",
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
    _assert_exactly_once(audit_effects(engine, db_url))


def test_transactional_relay_under_kills(engine, tmp_path):
    """The relay publishing each batch in a Kafka transaction (--transactional-id), killed
    at every kind of step, including between the Kafka commit and the database commit."""
    engine.create_topics()
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    events = produce_events(engine, EVENTS)
    with connect(db_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for event in events:
                outbox.add(tx, engine.output, event["key"], json.dumps(event))
    kills = run_with_kills(
        relay_command(engine, db_url, "--transactional-id", "relay-1", "--batch-size", "100"),
        relay.STEPS,
        tmp_path / "relay.log",
        kills=5,
        max_count=4,
        seed=8,
    )
    assert kills.kills >= 3, kills
    report, _ = audit_topic(engine, dedupe=True)
    _assert_exactly_once(report)


@pytest.mark.parametrize("engine", [ONCEFLOW, on_apache_kafka()], indirect=True)
def test_a_fenced_static_member_stops_the_worker(engine, tmp_path):
    """Another consumer taking the worker's group.instance.id fences it (FENCED_INSTANCE_ID,
    a fatal consumer error; on a cluster also after a group coordinator failover): the
    worker exits with the error at once instead of polling a dead consumer."""
    from confluent_kafka import Consumer

    engine.create_topics()
    produce_events(engine, 100)
    log_path = tmp_path / "worker.log"
    command = worker_command("baseline", engine, f"sqlite:///{tmp_path / 'app.db'}",
                             "--idle-exit", "60")  # fmt: skip
    with open(log_path, "a") as log:
        worker = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
    usurper = Consumer({"bootstrap.servers": engine.bootstrap, "group.id": engine.group,
                        "group.instance.id": "worker-1", "session.timeout.ms": 6000})  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "assigned" not in log_path.read_text():
            assert time.monotonic() < deadline and worker.poll() is None, log_path.read_text()
            time.sleep(0.2)
        usurper.subscribe([engine.input])
        deadline = time.monotonic() + 30
        while worker.poll() is None and time.monotonic() < deadline:
            usurper.poll(0.2)
        code = worker.poll()
        assert code not in (None, 0), f"the fenced worker kept running; see {log_path}"
        assert "fenced" in log_path.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()
        usurper.close()
