"""Offsets in transactions: AddOffsetsToTxn and TxnOffsetCommit (epochs, unknown topics,
members and versions), and what OffsetFetch shows before and after the commit or
abort."""

from __future__ import annotations

import pytest

from tests.differential import group_steps as gs
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.scenario import Scenario, check, scenarios
from tests.differential.txn_helpers import V1, V2, C, G, P, T, X, begin, end, tproduce, view

pytestmark = pytest.mark.xdist_group("differential")


def with_offsets(commit: bool, mode) -> list:
    return [
        ts.topic(T),
        *begin(mode),
        tproduce((b"a",), mode=mode),
        xs.add_offsets(P, X, G),
        xs.txn_offset_commit(P, X, G, {T: [(0, 1)]}),
        gs.offset_fetch(C, G, {T: [0]}),
        gs.offset_fetch(C, G, {T: [0]}, require_stable=True),
        *end(commit, mode),
        gs.offset_fetch(C, G, {T: [0]}),
        gs.offset_fetch(C, G, {T: [0]}, require_stable=True),
        *view(),
    ]


SCENARIOS = scenarios(
    *[
        Scenario(f"txn offsets {name} {label}", with_offsets(commit, mode))
        for name, mode in (("v1", V1), ("v2", V2))
        for label, commit in (("commit", True), ("abort", False))
    ],
    Scenario(
        "txn offset commit without add offsets",
        [
            ts.topic(T),
            *begin(),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}),
            *end(True),
            gs.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn offset commit wrong epoch",
        [
            ts.topic(T),
            *begin(),
            xs.add_offsets(P, X, G),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=-1),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=1),
            *end(True),
            gs.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn offset commit unknown topic",
        [
            ts.topic(T),
            *begin(),
            xs.add_offsets(P, X, G),
            xs.txn_offset_commit(P, X, G, {"~absent": [(0, 5)], T: [(7, 1)]}),
            *end(True),
            gs.offset_fetch(C, G, {T: [0, 7], "~absent": [0]}),
        ],
    ),
    Scenario(
        "txn offset commit with unknown member",
        [
            ts.topic(T),
            *begin(),
            xs.add_offsets(P, X, G),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}, generation_id=3, member_id="nobody"),
            *end(True),
            gs.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn add offsets wrong epoch",
        [
            ts.topic(T),
            *begin(),
            xs.add_offsets(P, X, G, epoch_offset=1),
            xs.add_offsets(P, X, G, epoch_offset=-1),
            *end(False),
        ],
    ),
)

SCENARIOS += [
    # found by the generated sequences
    Scenario(
        "txn offset commit of an unknown topic without a producer",
        [ts.topic(T), xs.txn_offset_commit(P, X, G, {"~absent": [(0, 1)], T: [(0, 1)]})],
    ),
]
SCENARIOS += [
    Scenario(
        f"txn offset commit wrong epoch v{version}",
        [
            ts.topic(T),
            *begin(),
            xs.add_offsets(P, X, G),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=-1, version=version),
            xs.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=1, version=version),
            *end(True),
            gs.offset_fetch(C, G, {T: [0]}),
        ],
    )
    for version in (0, 2, 3, 4)
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
