"""Fetch and ListOffsets: offsets out of range and inside a batch, byte limits, unknown
topics and partitions, several partitions, min bytes, timestamps, special and invalid
timestamps, and old versions of Produce, Fetch and ListOffsets."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential.driver import Step
from tests.differential.records import BASE_TIME_MS
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

P, C = "p1", "c1"
T = "~t"

SCENARIOS = scenarios(
    Scenario(
        "fetch out of range",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a")),
            rs.fetch(C, T, 5),
            rs.fetch(C, T, -1),
            rs.fetch(C, T, 1),
        ],
    ),
    Scenario(
        "fetch in the middle of a batch",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a", b"b", b"c")),
            rs.fetch(C, T, 1),
            rs.fetch(C, T, 2),
        ],
    ),
    Scenario(
        "fetch with a tiny limit",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a" * 100)),
            rs.produce(P, T, rs.batch(b"b" * 100)),
            rs.fetch(C, T, 0, max_bytes=10),
            rs.fetch(C, T, 0, max_bytes=150),
        ],
    ),
    Scenario(
        "fetch unknown topic and partition",
        [ts.topic(T), rs.fetch(C, "~absent"), rs.fetch(C, T, partition=4)],
    ),
    Scenario(
        "fetch several partitions",
        [
            ts.topic(T, 3),
            rs.produce(P, T, rs.batch(b"x"), partition=1),
            Step(
                C,
                1,
                {
                    "max_wait": 0,
                    "min_bytes": 0,
                    "topics": [
                        {
                            "topic": T,
                            "topic_id": sv.TopicId(T),
                            "partitions": [
                                {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                                for i in (0, 1, 2)
                            ],
                        }
                    ],
                },
            ),
        ],
    ),
    Scenario(
        "fetch waits for min bytes",
        [
            ts.topic(T),
            Step(
                C,
                1,
                {
                    "max_wait": 200,
                    "min_bytes": 1,
                    "topics": [
                        {
                            "topic": T,
                            "topic_id": sv.TopicId(T),
                            "partitions": [
                                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                            ],
                        }
                    ],
                },
            ),
        ],
    ),
    Scenario(
        "list offsets by timestamp",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a", b"b", b"c")),
            rs.produce(P, T, rs.batch(b"d", timestamp_ms=BASE_TIME_MS + 10)),
            *[
                rs.list_offsets(C, T, stamp)
                for stamp in (
                    BASE_TIME_MS - 5,
                    BASE_TIME_MS,
                    BASE_TIME_MS + 1,
                    BASE_TIME_MS + 2,
                    BASE_TIME_MS + 5,
                    BASE_TIME_MS + 10,
                    BASE_TIME_MS + 11,
                    rs.MAX_TIMESTAMP,
                    -4,
                    -5,
                )
            ],
        ],
    ),
    Scenario(
        "list offsets on an empty topic",
        [
            ts.topic(T),
            *[rs.list_offsets(C, T, stamp) for stamp in (-1, -2, -3, -4, -5, BASE_TIME_MS)],
        ],
    ),
    Scenario(
        "list offsets invalid timestamp",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a")),
            rs.list_offsets(C, T, -6),
            rs.list_offsets(C, T, -100),
        ],
    ),
    Scenario(
        "list offsets unknown topic and partition",
        [ts.topic(T), rs.list_offsets(C, "~absent"), rs.list_offsets(C, T, partition=7)],
    ),
    Scenario(
        "list offsets old versions",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a", b"b")),
            *[rs.list_offsets(C, T, -1, version=v) for v in (1, 2, 4, 6, 7, 8)],
        ],
    ),
    Scenario(
        "produce and fetch old versions",
        [
            ts.topic(T),
            *[rs.produce(P, T, rs.batch(b"v%d" % v), version=v) for v in (3, 5, 7, 8, 9, 10)],
            *[rs.fetch(C, T, 0, version=v) for v in (4, 7, 11, 12, 13, 15, 16)],
        ],
    ),
)

SCENARIOS += [  # found by the generated sequences
    Scenario(
        "fetch limit ends inside the second batch",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a" * 20)),
            rs.produce(P, T, rs.batch(b"b" * 20)),
            rs.fetch(C, T, 0, max_bytes=100),
        ],
    ),
    Scenario(
        "fetch negative max bytes",
        [ts.topic(T), rs.produce(P, T, rs.batch(b"a")), rs.fetch(C, T, 0, max_bytes=-1)],
    ),
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "fetch negative max bytes": ("fetch-negative-max-bytes",),
        "fetch limit ends inside the second batch": ("fetch-partial-batch",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
