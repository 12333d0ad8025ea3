"""Transactions step by step, v1 and v2, with what readers see after each step:
AddPartitionsToTxn, transactional Produce (sequences, batches that do not belong) and
EndTxn, in order and out of order."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.driver import Step
from tests.differential.scenario import Scenario, check, expecting, scenarios
from tests.differential.txn_helpers import P2, V1, V2, C, P, T, X, begin, end, tproduce, view

pytestmark = pytest.mark.xdist_group("differential")


def basic(commit: bool, mode) -> list:
    return [
        ts.topic(T),
        *begin(mode),
        tproduce((b"a", b"b"), mode=mode),
        *view(),
        xs.describe_transactions([X]),
        *end(commit, mode),
        *view(),
        xs.describe_transactions([X]),
    ]


SCENARIOS = scenarios(
    *[
        Scenario(f"txn {name} {label}", build(commit, mode))
        for name, mode in (("v1", V1), ("v2", V2))
        for label, commit in (("commit", True), ("abort", False))
        for build in (basic,)
    ],
    Scenario(
        "txn produce before add partitions (v1)",
        [ts.topic(T), xs.init_producer_id(P, X), tproduce((b"a",)), *view()],
    ),
    Scenario(
        "txn add partitions twice",
        [
            ts.topic(T),
            *begin(),
            xs.add_partitions(P, X, {T: [0]}),
            tproduce((b"a",)),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn add unknown topic and partition",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.add_partitions(P, X, {T: [0, 3], "~absent": [0]}),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn add partitions wrong producer id",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.init_producer_id(P2),
            xs.add_partitions(P2, X, {T: [0]}),
        ],
    ),
    Scenario(
        "txn add partitions stale epoch",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.init_producer_id(P, X),
            xs.add_partitions(P, X, {T: [0]}),
            Step(
                P,
                24,
                {
                    "v3_and_below_transactional_id": X,
                    "v3_and_below_producer_id": sv.pid(P),
                    "v3_and_below_producer_epoch": sv.epoch(P, -1),
                    "v3_and_below_topics": [{"name": T, "partitions": [0]}],
                },
                3,
            ),
        ],
    ),
    Scenario(
        "txn add partitions unknown transactional id",
        [ts.topic(T), xs.init_producer_id(P), xs.add_partitions(P, "~unknown", {T: [0]})],
    ),
    Scenario(
        "txn end with nothing begun",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.end_txn(P, X, True, version=4),
            xs.end_txn(P, X, False, version=4),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn end unknown transactional id",
        [xs.init_producer_id(P), xs.end_txn(P, "~unknown", True, version=4)],
    ),
    Scenario(
        "txn end wrong epoch",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            xs.end_txn(P, X, True, epoch_offset=1, version=4),
            xs.end_txn(P, X, True, epoch_offset=-1, version=4),
            *end(False),
            *view(),
        ],
    ),
    Scenario(
        "txn commit then commit again",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(True),
            xs.end_txn(P, X, True, version=4),
            xs.end_txn(P, X, False, version=4),
            *view(),
        ],
    ),
    Scenario(
        "txn abort then commit",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(False),
            xs.end_txn(P, X, True, version=4),
            *view(),
        ],
    ),
    Scenario(
        "txn empty commit", [xs.init_producer_id(P, X), *end(True), xs.describe_transactions([X])]
    ),
    Scenario(
        "txn two transactions in a row",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(True),
            xs.add_partitions(P, X, {T: [0]}),
            tproduce((b"b",), seq=1),
            *end(False),
            xs.add_partitions(P, X, {T: [0]}),
            tproduce((b"c",), seq=2),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 two transactions in a row",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            tproduce((b"a",), mode=V2),
            *end(True, V2),
            tproduce((b"b",), seq=0, mode=V2),
            *end(False, V2),
            tproduce((b"c",), seq=0, mode=V2),
            *end(True, V2),
            *view(),
        ],
    ),
    Scenario(
        "txn sequence gap inside a transaction",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            tproduce((b"c",), seq=2),
            tproduce((b"a",)),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn non-transactional batch from a transactional producer",
        [
            ts.topic(T),
            *begin(),
            rs.produce(
                P, T, rs.batch(b"x", producer=P, sequence=0), transactional_id=X, version=11
            ),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn batch with wrong transactional id",
        [ts.topic(T), *begin(), tproduce((b"a",), tx="~other"), *end(False), *view()],
    ),
)

SCENARIOS += [
    # found by the generated sequences
    Scenario(
        "txn abort with nothing produced leaves a marker",
        [
            ts.topic(T),
            *begin(),
            *end(False),
            rs.list_offsets(C, T, rs.MAX_TIMESTAMP),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 abort with nothing begun",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.end_txn(P, X, False, version=5),
            xs.txn_settled(X),
            xs.end_txn(P, X, False, version=5),
            xs.txn_settled(X),
            xs.end_txn(P, X, True, version=5),
            tproduce((b"a",), mode=V2),
            *end(True, V2),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 abort with nothing begun has a start time",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.describe_transactions([X]),
            xs.end_txn(P, X, False, version=5),
            xs.txn_settled(X),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn v2 first batch on a partition must start at sequence 0",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            xs.init_producer_id(P, X),
            tproduce((b"a", b"b", b"c"), seq=2, mode=V2),
            tproduce((b"a", b"b", b"c"), seq=0, mode=V2),
            tproduce((b"d",), seq=3, mode=V2),
            *end(True, V2),
            *view(),
        ],
    ),
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "txn produce before add partitions (v1)": ("transaction-abortable-v11",),
        "txn sequence gap inside a transaction": ("duplicate-log-append-time",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
