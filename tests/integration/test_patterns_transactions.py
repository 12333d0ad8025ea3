"""Kafka-transactions pattern under SIGKILL, and the unsafe inbox + Kafka transactions combo.

These need the broker's group offset APIs (send_offsets_to_transaction, OffsetFetch); they
are skipped, saying so, on a broker without them. The kill test runs on onceflow's broker
and on the shared 3-node Apache Kafka cluster (tests/integration/engines.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from onceflow.patterns import ConfigurationError, RunnerConfig, UnsafeCombinationWarning
from onceflow.patterns import transactional as txn_pattern
from tests.integration.patterns_harness import (
    ROOT,
    KillLog,
    audit_effects,
    audit_topic,
    feed_events,
    group_offsets_supported,
    produce_events,
    produce_in_waves,
    read_dlq,
    run_concurrently,
    run_with_kills,
    worker_command,
)
from tests.kit.engines import APACHE_KAFKA, ONCEFLOW, Engine, on_apache_kafka

EVENTS = 2000


def _require_group_offsets(engine: Engine) -> None:
    engine.create_topics()
    reason = group_offsets_supported(engine)
    if reason is not None:
        pytest.skip(f"broker lacks group offset APIs needed by Kafka transactions: {reason}")


@pytest.mark.parametrize(
    ("engine", "interval_ms"),
    [(ONCEFLOW, 0), (ONCEFLOW, 300), on_apache_kafka(APACHE_KAFKA, 0)],
    indirect=["engine"],
)
def test_kafka_transactions_exactly_once_under_kills(engine, tmp_path, interval_ms):
    """With ``commit_interval_ms`` the batches of 300 ms share one transaction: a kill
    anywhere aborts them all and they are read again from the transaction's start."""
    _require_group_offsets(engine)
    runs = 6 if engine.name == ONCEFLOW else 3

    command = worker_command("kafka_txn", engine, "-", "--idle-exit", "2", "--batch-size", "50",
                             "--commit-interval-ms", str(interval_ms))  # fmt: skip
    kills = run_with_kills(
        command,
        ("after_consume", *txn_pattern.STEPS),
        tmp_path / "worker.log",
        kills=runs,
        before_each=produce_in_waves(engine, EVENTS, runs),
    )
    assert kills.kills >= runs * 2 // 3, kills
    report, _ = audit_topic(engine)
    assert report.input.events == EVENTS
    assert report.ok, f"anomalies: {report.counts} e.g. {report.anomalies[:5]}"


def test_kafka_transactions_dead_letter_inside_the_transaction(engine, tmp_path):
    _require_group_offsets(engine)
    events = produce_events(engine, 1000, poison_every=50)
    run_with_kills(
        worker_command("kafka_txn", engine, "-", "--idle-exit", "2", "--batch-size", "50"),
        txn_pattern.STEPS,
        tmp_path / "worker.log",
        kills=4,
        external_every=0,
    )
    dead = read_dlq(engine)  # read_committed: aborted DLQ copies are invisible
    assert len(dead) == 1000 - len(events) == 20
    report, _ = audit_topic(engine)
    assert report.counts.get("missing", 0) == report.counts.get("duplicated", 0) == 0


def produce_a_handler_failure(engine: Engine, events: int) -> None:
    """``events`` events with, in their middle, a JSON value the worker's handler rejects
    (a string, not an event): a failure after decoding, not poison for the decoder."""
    produce_events(engine, events // 2)
    producer = Producer({"bootstrap.servers": engine.bootstrap, "acks": "all",
                         "enable.idempotence": True})  # fmt: skip
    producer.produce(engine.input, key=b"bad", value=json.dumps("not an event").encode())
    producer.flush(30)
    produce_events(engine, events - events // 2, start=events // 2)


@pytest.mark.parametrize(
    ("mode", "interval_ms"),
    [("kafka_txn", 0), ("kafka_txn", 30_000), ("alo_produce", 30_000)],
)
def test_handler_failures_rewind_every_uncommitted_batch(engine, tmp_path, mode, interval_ms):
    """A record the handler keeps failing on (retried, then dead-lettered). With a long
    commit interval every batch before it shares its transaction (the Runner commits only
    when idle): each failure aborts them all and they must be read again from the
    transaction's first offsets, or they are lost. At-least-once rewinds the failed batch
    and keeps the earlier ones for its next commit."""
    _require_group_offsets(engine)
    produce_a_handler_failure(engine, 1200)
    command = worker_command(mode, engine, "-", "--idle-exit", "2", "--batch-size", "20",
                             "--commit-interval-ms", str(interval_ms))  # fmt: skip
    run_with_kills(command, (), tmp_path / "worker.log", kills=0)
    assert len(read_dlq(engine)) == 1
    report, _ = audit_topic(engine)
    assert report.input.events == 1200
    assert report.counts.get("missing", 0) == 0, report.counts
    if mode == "kafka_txn":  # the only anomaly left: the bad record has no event id
        assert report.counts.get("duplicated", 0) == 0, report.counts


def test_at_least_once_with_a_commit_interval_loses_nothing_under_kills(engine, tmp_path):
    """Outputs are flushed before the interval's offsets commit: kills duplicate, never lose."""
    _require_group_offsets(engine)
    command = worker_command("alo_produce", engine, "-", "--idle-exit", "2", "--batch-size",
                             "50", "--commit-interval-ms", "300")  # fmt: skip
    kills = run_with_kills(
        command,
        ("after_consume", "after_produce", "after_kafka_commit"),
        tmp_path / "worker.log",
        kills=4,
        before_each=produce_in_waves(engine, EVENTS, 4),
    )
    assert kills.kills >= 2, kills
    report, _ = audit_topic(engine)
    assert report.input.events == EVENTS
    assert report.counts.get("missing", 0) == 0, report.counts


def test_two_transactional_workers_with_a_commit_interval_under_kills(engine, tmp_path):
    """Two kafka_transactions workers in one group (dynamic members: every restart is a
    rebalance), each transaction spanning 2 s of slow batches, killed at crash points
    while events arrive: a rebalance commits the open transaction before partitions move
    (or aborts it when they are lost), and the output holds every event exactly once."""
    _require_group_offsets(engine)

    def worker(instance: str, seed: int) -> Callable[[], KillLog]:
        command = worker_command("kafka_txn", engine, "-", "--idle-exit", "4",
                                 "--batch-size", "50", "--commit-interval-ms", "2000",
                                 "--slow-ms", "3", "--instance", "",
                                 "--txn-id", f"txn-{instance}")  # fmt: skip
        return lambda: run_with_kills(command, ("after_consume", *txn_pattern.STEPS),
                                      tmp_path / f"{instance}.log", kills=3, max_count=3,
                                      seed=seed)  # fmt: skip

    _, *results = run_concurrently(
        lambda: feed_events(engine, EVENTS), worker("w1", 21), worker("w2", 22)
    )
    assert sum(r.kills for r in results) >= 4, results
    drain = worker_command("kafka_txn", engine, "-", "--idle-exit", "8", "--instance", "",
                           "--txn-id", "txn-w1", "--commit-interval-ms", "2000")  # fmt: skip
    run_with_kills(drain, (), tmp_path / "drain.log", kills=0)
    report, _ = audit_topic(engine)
    assert report.input.events == EVENTS
    assert report.ok, f"anomalies: {report.counts} e.g. {report.anomalies[:5]}"


def test_inbox_with_kafka_transactions_is_refused():
    config = RunnerConfig(
        "127.0.0.1:1", "g", ["input"], pattern="kafka_transactions", inbox=True,
        database_url="sqlite:///x.db", transactional_id="t",
    )  # fmt: skip
    with pytest.raises(ConfigurationError, match="LOSE events"):
        config.validate()
    config.allow_unsafe_inbox_with_kafka_transactions = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config.validate()
    assert any(issubclass(w.category, UnsafeCombinationWarning) for w in caught)


def crash_then_finish(mode: str, engine: Engine, db_url: str, crash_at: str, tmp_path) -> str:
    """Run the worker (batches of 50) killed at ``crash_at``, then again to the end; the log."""
    command = worker_command(mode, engine, db_url, "--idle-exit", "2", "--batch-size", "50")
    log_path = tmp_path / "worker.log"
    with open(log_path, "a") as log:
        crashed = subprocess.run(
            command, cwd=ROOT, stdout=log, stderr=log, timeout=120,
            env={**os.environ, "ONCEFLOW_CRASH_AT": crash_at},
        )  # fmt: skip
        assert crashed.returncode == -9
        finished = subprocess.run(command, cwd=ROOT, stdout=log, stderr=log, timeout=120)
        assert finished.returncode == 0
    return log_path.read_text()


@pytest.mark.parametrize("db", ["sqlite"])
def test_inbox_with_kafka_transactions_loses_events(engine, tmp_path, db):
    """The seed article's appendix: the inbox commits the event ids, the process dies
    before the Kafka transaction commits; on redelivery the inbox skips those events as
    duplicates, so their outputs are never produced."""
    _require_group_offsets(engine)
    produce_events(engine, 500)
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    log = crash_then_finish("unsafe_inbox_txn", engine, db_url, "after_db_commit:3", tmp_path)
    assert "UNSAFE CONFIGURATION" in log
    effects = audit_effects(engine, db_url)
    assert effects.ok, effects.counts  # the database saw every event once...
    output, _ = audit_topic(engine)
    lost = output.counts.get("missing", 0)
    assert 0 < lost <= 50, output.counts  # ...but the killed batch never reaches Kafka
    assert output.counts.get("duplicated", 0) == 0


def test_at_most_once_loses_the_batch_killed_after_the_commit(engine, tmp_path):
    """Commit-before: a kill after the Kafka commit and before the work loses the batch."""
    _require_group_offsets(engine)
    produce_events(engine, 500)
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    crash_then_finish("at_most_once", engine, db_url, "after_kafka_commit:2", tmp_path)
    report = audit_effects(engine, db_url)
    assert 0 < report.counts.get("missing", 0) <= 50, report.counts
    assert report.counts.get("duplicated", 0) == 0
