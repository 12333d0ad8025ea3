"""Admin APIs for records and the cluster: DeleteRecords, DescribeCluster, log dirs,
leader elections and partition reassignments on one node, and WriteTxnMarkers sent by a
client."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.driver import Step
from tests.differential.scenario import Scenario, check, scenarios

pytestmark = pytest.mark.xdist_group("differential")

A, P, C = "admin", "p1", "c1"
T = "~t"


def delete_records(offsets: dict[str, list[tuple[int, int]]]) -> Step:
    return Step(
        A,
        21,
        {
            "topics": [
                {"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in parts]}
                for t, parts in offsets.items()
            ],
            "timeout": 5000,
        },
    )


SCENARIOS = scenarios(
    # ---- DeleteRecords
    Scenario(
        "delete records",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a", b"b", b"c")),
            rs.produce(P, T, rs.batch(b"d")),
            delete_records({T: [(0, 2)]}),
            *rs.offsets_view(C, T),
            rs.fetch(C, T, 1),
            delete_records({T: [(0, 1)]}),
            delete_records({T: [(0, -1)]}),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "delete records beyond the high watermark",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a")),
            delete_records({T: [(0, 5)]}),
            delete_records({T: [(0, -2)]}),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "delete records unknown topic and partition",
        [ts.topic(T), delete_records({"~absent": [(0, 1)], T: [(3, 1)]})],
    ),
    Scenario(
        "delete records during a transaction",
        [
            ts.topic(T),
            xs.init_producer_id(P, "~tx"),
            xs.add_partitions(P, "~tx", {T: [0]}),
            rs.produce(
                P,
                T,
                rs.batch(b"a", b"b", producer=P, sequence=0, transactional=True),
                transactional_id="~tx",
                version=11,
            ),
            delete_records({T: [(0, 2)]}),
            delete_records({T: [(0, -1)]}),
            *rs.offsets_view(C, T),
        ],
    ),
    # ---- cluster, log dirs, elections, reassignments
    Scenario(
        "describe cluster",
        [
            Step(A, 60, {"include_cluster_authorized_operations": False}),
            Step(A, 60, {"include_cluster_authorized_operations": True}),
            Step(A, 60, {"endpoint_type": 2}),
            Step(A, 60, {"endpoint_type": 7}),
        ],
    ),
    Scenario(
        "describe log dirs",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"abc")),
            Step(
                A,
                35,
                {
                    "topics": [
                        {"topic": T, "partitions": [0, 4]},
                        {"topic": "~absent", "partitions": [0]},
                    ]
                },
            ),
        ],
    ),
    Scenario(
        "alter replica log dirs",
        [
            ts.topic(T),
            Step(
                A,
                34,
                {"dirs": [{"path": "/nonexistent", "topics": [{"name": T, "partitions": [0]}]}]},
            ),
        ],
    ),
    Scenario(
        "elect leaders",
        [
            ts.topic(T, 2),
            Step(
                A,
                43,
                {
                    "election_type": 0,
                    "topic_partitions": [
                        {"topic": T, "partitions": [0, 1, 5]},
                        {"topic": "~absent", "partitions": [0]},
                    ],
                    "timeout": 5000,
                },
            ),
            Step(
                A,
                43,
                {
                    "election_type": 1,
                    "topic_partitions": [{"topic": T, "partitions": [0]}],
                    "timeout": 5000,
                },
            ),
            Step(
                A,
                43,
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": T, "partitions": [0]}],
                    "timeout": 5000,
                },
                0,
            ),
        ],
    ),
    Scenario(
        "partition reassignments",
        [
            ts.topic(T, 2),
            Step(A, 46, {"topics": [{"name": T, "partition_indexes": [0, 1]}], "timeout_ms": 5000}),
            Step(
                A,
                45,
                {
                    "topics": [
                        {
                            "name": T,
                            "partitions": [
                                {"partition_index": 0, "replicas": [1]},
                                {"partition_index": 1, "replicas": None},
                            ],
                        }
                    ],
                    "timeout_ms": 5000,
                },
            ),
            Step(
                A,
                45,
                {
                    "topics": [
                        {"name": T, "partitions": [{"partition_index": 0, "replicas": [7]}]},
                        {
                            "name": "~absent",
                            "partitions": [{"partition_index": 0, "replicas": [1]}],
                        },
                    ],
                    "timeout_ms": 5000,
                },
            ),
            Step(A, 46, {"topics": None, "timeout_ms": 5000}),
        ],
    ),
    # ---- inter-broker APIs from a client
    Scenario(
        "write txn markers from a client",
        [
            ts.topic(T),
            Step(
                A,
                27,
                {
                    "markers": [
                        {
                            "producer_id": 999999,
                            "producer_epoch": 0,
                            "transaction_result": False,
                            "topics": [{"name": T, "partition_indexes": [0]}],
                            "coordinator_epoch": 0,
                        }
                    ]
                },
            ),
            *rs.offsets_view(C, T),
        ],
    ),
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
