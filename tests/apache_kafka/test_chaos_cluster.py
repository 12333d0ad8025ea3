"""The chaos matrix's cells on the session's 3-node Apache Kafka cluster.

``make test`` runs four quick cells (60-90 s): the partition leader's node and the
transaction coordinator's node SIGKILLed inside a Kafka transaction, a worker SIGKILLed
between send_offsets and commit, and the at-least-once baseline, which must duplicate on
Kafka as on onceflow's broker (the audit can fail there too). ONCEFLOW_STRESS=1
(``make stress``) runs every quick cell the cluster can run but Spark's (tests/spark/ has
those), the group coordinator kills and two nodes down included (about 6 minutes), and the
database rows and their failovers on PostgreSQL.
"""

from __future__ import annotations

import json
import os

import pytest

from onceflow.chaos.harness import Engine, run_matrix
from onceflow.chaos.scenarios import APACHE_KAFKA, DUPLICATED, OK, select
from tests.postgres import postgres_server  # noqa: F401  (fixture)

STRESS = os.environ.get("ONCEFLOW_STRESS") == "1"
QUICK_CELLS = {
    ("fault/leader_kill", "kafka_transactions:after_produce"),
    ("fault/txn_coordinator_kill", "kafka_transactions:after_send_offsets"),
    ("runner/kafka_transactions", "after_send_offsets"),
    ("runner/at_least_once", "after_db_commit"),
}


def cluster_cells() -> list:
    cells = select(quick=True, engine=APACHE_KAFKA)
    cells = [(s, c) for s, c in cells if s.family != "spark"]  # Spark: tests/spark/
    if STRESS:
        return cells
    return [(s, c) for s, c in cells if (s.name, c.step) in QUICK_CELLS]


def test_quick_cells_on_the_cluster_are_as_predicted(apache_kafka_cluster, tmp_path):
    cells = cluster_cells()
    assert STRESS or len(cells) == len(QUICK_CELLS)
    matrix = run_matrix(cells, tmp_path, engine=Engine(APACHE_KAFKA, cluster=apache_kafka_cluster))
    assert matrix.engine == APACHE_KAFKA
    wrong = [r.to_dict() for r in matrix.mismatches]
    assert not wrong, f"{json.dumps(wrong, indent=1)}; logs in {tmp_path}"
    observed = {(r.scenario, r.step): r for r in matrix.results}
    # the audit sees the baseline's duplicates on Kafka too ...
    at_least_once = observed[("runner/at_least_once", "after_db_commit")]
    assert at_least_once.observed == {"db": DUPLICATED, "topic": DUPLICATED}
    assert at_least_once.counts["topic"]["duplicated"] > 0
    # ... and none after the leader's node died inside a transaction
    leader_kill = observed[("fault/leader_kill", "kafka_transactions:after_produce")]
    assert leader_kill.observed == {"topic": OK}
    assert "leader of" in leader_kill.note and "SIGKILLed" in leader_kill.note
    assert sorted(apache_kafka_cluster.running_nodes()) == [1, 2, 3]


POSTGRES_ROWS = ("runner/db_offsets", "runner/inbox", "fault/leader_kill",
                 "fault/group_coordinator_kill")  # fmt: skip


@pytest.mark.postgres
@pytest.mark.skipif(not STRESS, reason="make stress (ONCEFLOW_STRESS=1): about 3 minutes")
def test_database_cells_on_the_cluster_hold_on_postgresql(
    apache_kafka_cluster,
    postgres_server,  # noqa: F811
    tmp_path,
):
    """The Runner's database patterns, and the failovers of their rows with a database
    output (input leader killed before the offsets are committed, group coordinator
    killed before the Kafka offset commit), one PostgreSQL database per cell."""
    cells = [
        (s, c)
        for s, c in select(quick=True, patterns=POSTGRES_ROWS, engine=APACHE_KAFKA)
        if "db" in c.expected
    ]
    assert {c.fault for _, c in cells} >= {"sigkill", "leader_kill", "group_coordinator_kill"}
    matrix = run_matrix(
        cells,
        tmp_path,
        database_url=postgres_server.url(),
        engine=Engine(APACHE_KAFKA, cluster=apache_kafka_cluster),
    )
    assert matrix.database == "postgresql"
    wrong = [r.to_dict() for r in matrix.mismatches]
    assert not wrong, f"{json.dumps(wrong, indent=1)}; logs in {tmp_path}"
    assert all(r.observed == {"db": OK} for r in matrix.results)
