"""What readers and the admin APIs see of transactions: two producers on one partition,
the last stable offset, a transaction over two topics, read_committed fetches, and
ListTransactions, DescribeTransactions and DescribeProducers."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.records import BASE_TIME_MS
from tests.differential.scenario import Scenario, check, scenarios
from tests.differential.txn_helpers import P2, T2, C, G, P, T, X, begin, end, tproduce, view

pytestmark = pytest.mark.xdist_group("differential")

SCENARIOS = scenarios(
    Scenario(
        "txn two producers on one partition",
        [
            ts.topic(T),
            *begin(),
            *begin(producer=P2, tx="~tx2"),
            tproduce((b"a",)),
            tproduce((b"b",), producer=P2, tx="~tx2"),
            tproduce((b"c",), seq=1),
            *view(),
            *end(False),
            *view(),
            *end(True, producer=P2, tx="~tx2"),
            *view(),
        ],
    ),
    Scenario(
        "txn open transaction holds the LSO",
        [
            ts.topic(T),
            rs.produce(P2, T, rs.batch(b"plain")),
            *begin(),
            tproduce((b"t",)),
            rs.produce(P2, T, rs.batch(b"after")),
            *view(),
            rs.list_offsets(C, T, BASE_TIME_MS, isolation=rs.READ_COMMITTED),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn spanning two topics",
        [
            ts.topic(T),
            ts.topic(T2, 2),
            *begin(topics=(T, T2)),
            xs.add_partitions(P, X, {T2: [1]}),
            tproduce((b"a",)),
            tproduce((b"b",), topic=T2),
            tproduce((b"c",), topic=T2, partition=1),
            *end(False),
            *view(),
            *view(T2),
            rs.fetch(C, T2, partition=1, isolation=rs.READ_COMMITTED),
        ],
    ),
    Scenario(
        "txn read committed fetch from the middle",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a", b"b", b"c")),
            *end(False),
            *begin(),
            tproduce((b"d",), seq=3),
            *end(True),
            rs.fetch(C, T, 2, isolation=rs.READ_COMMITTED),
            rs.fetch(C, T, 4, isolation=rs.READ_COMMITTED),
            rs.fetch(C, T, 5, isolation=rs.READ_COMMITTED),
        ],
    ),
    Scenario(
        "txn list transactions",
        [
            ts.topic(T),
            *begin(),
            tproduce((b"a",)),
            *begin(producer=P2, tx="~tx2"),
            xs.list_transactions(),
            xs.list_transactions(["Ongoing"]),
            xs.list_transactions(["CompleteCommit"]),
            xs.list_transactions(pids=[sv.pid(P)]),
            xs.list_transactions(duration=3_600_000),
            *end(True),
            xs.list_transactions(),
            xs.list_transactions(["CompleteCommit"]),
        ],
    ),
    Scenario(
        "txn describe transactions",
        [
            ts.topic(T),
            *begin(),
            xs.describe_transactions([X, "~unknown", ""]),
            tproduce((b"a",)),
            xs.add_offsets(P, X, G),
            xs.describe_transactions([X]),
            *end(True),
            xs.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn describe producers",
        [
            ts.topic(T, 2),
            xs.init_producer_id(P2),
            rs.produce(P2, T, rs.batch(b"i", producer=P2, sequence=0)),
            *begin(topics=()),
            xs.add_partitions(P, X, {T: [0, 1]}),
            tproduce((b"a",)),
            xs.describe_producers(T, [0, 1, 5]),
            xs.describe_producers("~absent"),
            *end(True),
            xs.describe_producers(T, [0, 1]),
        ],
    ),
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
