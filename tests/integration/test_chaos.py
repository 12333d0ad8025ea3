"""``onceflow chaos``: the quick matrix passes, and its cells are what the articles predict.

Every cell is a real worker process SIGKILLed at one step on a real broker, restarted and
audited. The baselines must show the anomalies the articles predict (so the audit can
fail), and onceflow's exactly-once rows must show none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.chaos.scenarios import SCENARIOS, select
from tests.postgres import postgres_server  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
EXACTLY_ONCE = {scenario.name for scenario in SCENARIOS if scenario.exactly_once}


def run_chaos(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict, str]:
    prefix = tmp_path / "matrix"
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "chaos", "--out", str(prefix),
         "--work-dir", str(tmp_path / "work"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    report = json.loads(prefix.with_suffix(".json").read_text())
    assert prefix.with_suffix(".md").read_text().startswith("# Guarantees: the chaos matrix")
    assert prefix.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    return result.returncode, report, result.stdout + result.stderr


def test_quick_matrix_is_as_predicted(tmp_path):
    code, report, output = run_chaos(tmp_path, "--quick")
    wrong = [r for r in report["results"] if not r["matches"]]
    assert not wrong, json.dumps(wrong, indent=1)
    assert code == 0, output[-3000:]
    assert report["cells"] == len(select(quick=True))
    observed = {(r["scenario"], r["step"]): r["observed"] for r in report["results"]}
    # the audit catches what the articles predict ...
    assert observed[("article/no_dedup", "produce")] == {
        "rest": "duplicated", "db": "duplicated", "topic": "duplicated"}  # fmt: skip
    assert (
        observed[("article/idempotent_consumer_kafka_transactions_db_first", "commit_db")]["topic"]
        == "lost"
    )
    assert observed[("runner/at_most_once", "after_kafka_commit")]["db"] == "lost"
    # ... and finds nothing where onceflow claims exactly-once
    for result in report["results"]:
        if result["scenario"] in EXACTLY_ONCE:
            assert set(result["observed"].values()) == {"ok"}, result


@pytest.mark.postgres
def test_matrix_on_postgresql(tmp_path, postgres_server):  # noqa: F811
    code, report, output = run_chaos(
        tmp_path, "--quick", "--database-url", postgres_server.url(),
        "--pattern", "article/idempotent_consumer_outbox", "--pattern", "runner/db_offsets",
        "--pattern", "runner/inbox", "--pattern", "fault/database_unavailable",
    )  # fmt: skip
    assert report["database"] == "postgresql"
    wrong = [r for r in report["results"] if not r["matches"]]
    assert not wrong and code == 0, json.dumps(wrong, indent=1) + output[-2000:]
    assert report["cells"] >= 5


def test_exactly_once_rows_hold_with_the_consumer_group_protocol(tmp_path):
    """The workers' consumers with group.protocol=consumer (KIP-848): offset commits and
    transactional offsets go through the consumer-protocol checks; a broker kill too."""
    code, report, output = run_chaos(
        tmp_path, "--quick",
        "--pattern", "article/kafka_transactions", "--pattern", "runner/kafka_transactions",
        "--pattern", "runner/at_least_once", "--pattern", "fault/broker_kill",
        env={"ONCEFLOW_CHAOS_GROUP_PROTOCOL": "consumer"},
    )  # fmt: skip
    wrong = [r for r in report["results"] if not r["matches"]]
    assert not wrong and code == 0, json.dumps(wrong, indent=1) + output[-2000:]
    assert report["cells"] >= 4
