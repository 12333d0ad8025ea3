"""Kafka-transactions pattern under SIGKILL, and the unsafe inbox + Kafka transactions combo.

These need the broker's group offset APIs (send_offsets_to_transaction, OffsetFetch); they
are skipped, saying so, on a broker without them. The kill test runs on onceflow's broker
and on the shared 3-node Apache Kafka cluster (tests/integration/engines.py).
"""

from __future__ import annotations

import os
import subprocess
import warnings

import pytest

from onceflow.patterns import ConfigurationError, RunnerConfig, UnsafeCombinationWarning
from onceflow.patterns import transactional as txn_pattern
from tests.integration.engines import (
    ONCEFLOW,
    Engine,
    on_apache_kafka,
)
from tests.integration.patterns_harness import (
    ROOT,
    audit_effects,
    audit_topic,
    group_offsets_supported,
    produce_events,
    read_dlq,
    run_with_kills,
    worker_command,
)

EVENTS = 2000


def _require_group_offsets(engine: Engine) -> None:
    engine.create_topics()
    reason = group_offsets_supported(engine)
    if reason is not None:
        pytest.skip(f"broker lacks group offset APIs needed by Kafka transactions: {reason}")


@pytest.mark.parametrize("engine", [ONCEFLOW, on_apache_kafka()], indirect=True)
def test_kafka_transactions_exactly_once_under_kills(engine, tmp_path):
    _require_group_offsets(engine)
    runs = 6 if engine.name == ONCEFLOW else 3
    wave = EVENTS // (runs + 1)

    def produce_wave(run: int) -> None:
        produce_events(engine, EVENTS - wave * runs if run == runs else wave, start=wave * run)

    kills = run_with_kills(
        worker_command("kafka_txn", engine, "-", "--idle-exit", "2", "--batch-size", "50"),
        ("after_consume", *txn_pattern.STEPS),
        tmp_path / "worker.log",
        kills=runs,
        before_each=produce_wave,
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
