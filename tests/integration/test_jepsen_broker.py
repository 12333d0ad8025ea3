"""Jepsen-style check of the broker: concurrent transactions, aborts, reads and SIGKILLs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from onceflow.verify.jepsen import (
    ABORTED,
    COMMITTED,
    CheckResult,
    History,
    WorkloadConfig,
    check,
    run_workload,
)
from tests.kit.clients import create_topic


def run_and_check(
    broker: Any, config: WorkloadConfig, tmp_path: Path
) -> tuple[History, CheckResult]:
    """Run the workload on a topic of its own, keep its history in ``tmp_path`` and check
    it: the history and the check, which found no violation."""
    create_topic(broker.bootstrap, config.topic, config.partitions)
    history = run_workload(broker, config)
    history.save(tmp_path / "history.jsonl")
    result = check(history)
    assert result.ok, f"{result.summary()}\nhistory: {tmp_path / 'history.jsonl'}"
    return history, result


@pytest.mark.slow
def test_transactions_survive_concurrent_clients_and_broker_kills(kafka_broker_factory, tmp_path):
    broker = kafka_broker_factory(
        config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"},
        process=True,  # the workload kills it
    )
    history, result = run_and_check(
        broker, WorkloadConfig(duration=36.0, kills=3, seed=42), tmp_path
    )

    kinds = [event.get("kind") for event in history.events]
    assert kinds.count("kill") == 3 and kinds.count("restart") == 3
    # The run did enough to mean something.
    assert result.stats[COMMITTED] > 200 and result.stats[ABORTED] > 50
    assert result.stats["consumer_reads"] > 500 and result.stats["final_records"] > 500

    # The checker is sensitive on this very history: pretend one committed transaction
    # had been aborted, and another one lost a value.
    tampered = copy.deepcopy(history)
    committed = [txn for txn in tampered.txns if txn.outcome == COMMITTED]
    committed[0].outcome = ABORTED
    lost_value = committed[1].writes[0][1]
    tampered.final = [record for record in tampered.final if record.value != lost_value]
    found = check(tampered).violations
    assert found["aborted_read"] and found["lost_write"]


@pytest.mark.slow
def test_transactions_survive_kills_with_small_segments(kafka_broker_factory, tmp_path):
    broker = kafka_broker_factory(
        config={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "log.segment.bytes": "65536",
        },
        process=True,  # the workload kills it
    )
    run_and_check(
        broker, WorkloadConfig(duration=20.0, kills=2, seed=11, settle_timeout=15.0), tmp_path
    )
