"""Produce requests and batches: acks, unknown and internal topics and partitions, null,
empty and damaged batches, several partitions in one request, and the topic configs that
refuse records (size, timestamps, compaction)."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import topic_steps as ts
from tests.differential.driver import Step
from tests.differential.records import BASE_TIME_MS
from tests.differential.scenario import Scenario, check, expecting, scenarios
from tests.kit.batches import record_batch

pytestmark = pytest.mark.xdist_group("differential")

P, C = "p1", "c1"
T = "~t"


class RawBatch:
    """A batch whose bytes are damaged after encoding (bad CRC, bad magic...)."""

    def __init__(self, damage: str) -> None:
        self.damage = damage

    def resolve_on(self, side) -> bytes:
        data = bytearray(record_batch([b"x", b"y"], timestamp_ms=BASE_TIME_MS, timestamp_step_ms=1))
        if self.damage == "crc":
            data[-1] ^= 0xFF
        elif self.damage == "magic":
            data[16] = 1
        elif self.damage == "length":
            data[8:12] = (len(data) + 40).to_bytes(4, "big")
        elif self.damage == "truncated":
            del data[-5:]
        elif self.damage == "negative-count":
            data[57:61] = (-1 & 0xFFFFFFFF).to_bytes(4, "big")
        return bytes(data)


def produce_raw(damage: str) -> Step:
    step = rs.produce(P, T, None, label=f"damaged batch: {damage}")
    step.body["topic_data"][0]["partition_data"][0]["records"] = RawBatch(damage)
    return step


def produce_to_partitions(*partition_data: dict) -> Step:
    """One Produce request (acks=all) to T carrying ``partition_data`` as given: several
    partitions, one partition twice, raw records."""
    body = {
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": T, "partition_data": [*partition_data]}],
    }
    return Step(P, 0, body)


SCENARIOS = scenarios(
    Scenario(
        "plain produce and read back",
        [ts.topic(T), rs.produce(P, T, rs.batch(b"a", b"b")), *rs.offsets_view(C, T)],
    ),
    Scenario(
        "plain produce acks=1",
        [ts.topic(T), rs.produce(P, T, rs.batch(b"a"), acks=1), *rs.offsets_view(C, T)],
    ),
    Scenario(
        "plain produce acks=0 then read",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a"), acks=0),
            rs.produce(P, T, rs.batch(b"b"), acks=1),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "invalid acks=2",
        [ts.topic(T), rs.produce(P, T, rs.batch(b"a"), acks=2), *rs.offsets_view(C, T)],
    ),
    Scenario("invalid acks=-2", [ts.topic(T), rs.produce(P, T, rs.batch(b"a"), acks=-2)]),
    Scenario(
        "produce to unknown topic",
        [rs.produce(P, "~absent", rs.batch(b"a")), ts.metadata(["~absent"])],
    ),
    Scenario(
        "produce to unknown partition",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a"), partition=3),
            rs.produce(P, T, rs.batch(b"a"), partition=-1),
        ],
    ),
    Scenario("produce null records", [ts.topic(T), rs.produce(P, T, None), *rs.offsets_view(C, T)]),
    Scenario(
        "produce empty records",
        [
            ts.topic(T),
            produce_to_partitions({"index": 0, "records": b""}),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario("produce bad crc", [ts.topic(T), produce_raw("crc"), *rs.offsets_view(C, T)]),
    Scenario("produce bad magic", [ts.topic(T), produce_raw("magic"), *rs.offsets_view(C, T)]),
    Scenario(
        "produce batch length past the data",
        [ts.topic(T), produce_raw("length"), *rs.offsets_view(C, T)],
    ),
    Scenario(
        "produce truncated batch", [ts.topic(T), produce_raw("truncated"), *rs.offsets_view(C, T)]
    ),
    Scenario(
        "produce negative record count",
        [ts.topic(T), produce_raw("negative-count"), *rs.offsets_view(C, T)],
    ),
    Scenario("produce to an internal topic", [rs.produce(P, "__consumer_offsets", rs.batch(b"a"))]),
    Scenario(
        "produce to an invalid topic name",
        [rs.produce(P, "~bad/name", rs.batch(b"a")), rs.produce(P, "", rs.batch(b"a"))],
    ),
    Scenario(
        "produce several partitions in one request",
        [
            ts.topic(T, 3),
            produce_to_partitions(
                *({"index": i, "records": rs.batch(b"v%d" % i)} for i in (0, 2, 5))
            ),
            rs.list_offsets(C, T, partition=2),
        ],
    ),
    Scenario(
        "produce one partition twice in one request",
        [
            ts.topic(T),
            produce_to_partitions(
                {"index": 0, "records": rs.batch(b"a")}, {"index": 0, "records": rs.batch(b"b")}
            ),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "record larger than max.message.bytes",
        [
            ts.topic(T, configs={"max.message.bytes": "200"}),
            rs.produce(P, T, rs.batch(b"x" * 400)),
            rs.produce(P, T, rs.batch(b"small")),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "timestamp past message.timestamp.after.max.ms",
        [
            ts.topic(T, configs={"message.timestamp.after.max.ms": "3600000"}),
            rs.produce(P, T, rs.batch(b"future", timestamp_ms=4_102_444_800_000)),
            rs.produce(P, T, rs.batch(b"now")),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "timestamp before message.timestamp.before.max.ms",
        [
            ts.topic(T, configs={"message.timestamp.before.max.ms": "3600000"}),
            rs.produce(P, T, rs.batch(b"old", timestamp_ms=1_000_000_000_000)),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "log append time topic",
        [
            ts.topic(T, configs={"message.timestamp.type": "LogAppendTime"}),
            rs.produce(P, T, rs.batch(b"a", b"b")),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "compacted topic refuses null keys",
        [
            ts.topic(T, configs={"cleanup.policy": "compact"}),
            rs.produce(P, T, rs.batch(b"nokey")),
            rs.produce(P, T, rs.batch(b"v", keys=(b"k",))),
            *rs.offsets_view(C, T),
        ],
    ),
    Scenario(
        "records with headers",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"v", headers=((b"h1", b"x"), (b"h2", None)))),
            rs.fetch(C, T),
        ],
    ),
)

SCENARIOS += [  # found by the generated sequences
    Scenario(
        "acks=0 produce that fails closes the connection",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a"), partition=5, acks=0),
            rs.barrier(P),
            rs.produce(P, "~absent", rs.batch(b"b"), acks=0),
            rs.barrier(P),
            rs.produce(P, T, rs.batch(b"c"), acks=0),
            rs.produce(P, T, rs.batch(b"d"), acks=1),
            *rs.offsets_view(C, T),
        ],
    ),
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "produce null records": ("produce-null-records",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
