"""Transactions fenced and timed out: a new InitProducerId fences the open transaction
(v1 and v2), re-initialising with the producer id and epoch, transaction timeouts and
the abort of a timed-out transaction."""

from __future__ import annotations

import pytest

from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.driver import Pause, Step
from tests.differential.scenario import Scenario, check, expecting, scenarios
from tests.differential.txn_helpers import P2, V2, P, T, X, begin, end, tproduce, view

pytestmark = pytest.mark.xdist_group("differential")

SCENARIOS = scenarios(
    Scenario(
        "txn fenced by a new init",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            xs.init_producer_id(P2, X),
            tproduce((b"b",), seq=1),
            xs.end_txn(P, X, True, version=4),
            xs.txn_settled(X),
            *view(),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn new producer after fencing commits",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            xs.init_producer_id(P2, X),
            xs.add_partitions(P2, X, {T: [0]}),
            tproduce((b"b",), producer=P2),
            *end(True, producer=P2),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 fenced by a new init",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            tproduce((b"a",), mode=V2),
            xs.init_producer_id(P2, X),
            tproduce((b"b",), seq=1, mode=V2),
            xs.end_txn(P, X, True, version=5),
            xs.txn_settled(X),
            *view(),
        ],
    ),
    Scenario(
        "txn re-init with producer id and epoch",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            xs.init_producer_id(P, X, with_epoch=True),
            xs.txn_settled(X),
            *view(),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn re-init with a wrong epoch",
        [
            ts.topic(T),
            xs.init_producer_id(P, X),
            Step(
                P,
                22,
                {
                    "transactional_id": X,
                    "transaction_timeout": 60000,
                    "producer_id": sv.pid(P),
                    "producer_epoch": sv.epoch(P, 5),
                },
            ),
        ],
    ),
    Scenario(
        "txn timeout too large",
        [
            xs.init_producer_id(P, X, timeout_ms=900001),
            xs.init_producer_id(P, X, timeout_ms=0),
            xs.init_producer_id(P, X, timeout_ms=-5),
        ],
    ),
    Scenario(
        "txn times out and is aborted",
        [
            ts.topic(T),
            *begin(timeout_ms=1000),
            tproduce((b"a",)),
            Pause(4.0),
            xs.txn_settled(X),
            xs.describe_transactions([X]),
            *view(),
            xs.end_txn(P, X, True, version=4),
            tproduce((b"b",), seq=1),
        ],
    ),
    Scenario(
        "txn init producer id for an idempotent producer with epoch",
        [xs.init_producer_id(P), xs.init_producer_id(P, with_epoch=True)],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
        "txn re-init with producer id and epoch": ("describe-producers-epoch-after-reinit",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
