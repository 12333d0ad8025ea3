"""Produce, Fetch and ListOffsets: idempotent sequences, epochs, bad batches, offsets."""

from __future__ import annotations

import pytest

from tests.differential import steps as s
from tests.differential.driver import Step
from tests.differential.records import BASE_TIME_MS, Batch
from tests.differential.scenario import Scenario, check, expecting, scenarios
from tests.kit.batches import record_batch

pytestmark = pytest.mark.xdist_group("differential")

P, C = "p1", "c1"
T = "~t"


def b(*values: bytes, seq: int = -1, producer: str | None = P, **kw) -> Batch:
    return s.batch(*values, producer=producer, sequence=seq, **kw)


def idem(*steps_after) -> list:
    return [s.topic(T), s.init_producer_id(P), *steps_after]


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
    step = s.produce(P, T, None, label=f"damaged batch: {damage}")
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
        [s.topic(T), s.produce(P, T, s.batch(b"a", b"b")), *s.offsets_view(C, T)],
    ),
    Scenario(
        "plain produce acks=1",
        [s.topic(T), s.produce(P, T, s.batch(b"a"), acks=1), *s.offsets_view(C, T)],
    ),
    Scenario(
        "plain produce acks=0 then read",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a"), acks=0),
            s.produce(P, T, s.batch(b"b"), acks=1),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "invalid acks=2",
        [s.topic(T), s.produce(P, T, s.batch(b"a"), acks=2), *s.offsets_view(C, T)],
    ),
    Scenario("invalid acks=-2", [s.topic(T), s.produce(P, T, s.batch(b"a"), acks=-2)]),
    Scenario(
        "produce to unknown topic",
        [s.produce(P, "~absent", s.batch(b"a")), s.metadata(["~absent"])],
    ),
    Scenario(
        "produce to unknown partition",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a"), partition=3),
            s.produce(P, T, s.batch(b"a"), partition=-1),
        ],
    ),
    Scenario("produce null records", [s.topic(T), s.produce(P, T, None), *s.offsets_view(C, T)]),
    Scenario(
        "produce empty records",
        [
            s.topic(T),
            produce_to_partitions({"index": 0, "records": b""}),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario("produce bad crc", [s.topic(T), produce_raw("crc"), *s.offsets_view(C, T)]),
    Scenario("produce bad magic", [s.topic(T), produce_raw("magic"), *s.offsets_view(C, T)]),
    Scenario(
        "produce batch length past the data",
        [s.topic(T), produce_raw("length"), *s.offsets_view(C, T)],
    ),
    Scenario(
        "produce truncated batch", [s.topic(T), produce_raw("truncated"), *s.offsets_view(C, T)]
    ),
    Scenario(
        "produce negative record count",
        [s.topic(T), produce_raw("negative-count"), *s.offsets_view(C, T)],
    ),
    Scenario("produce to an internal topic", [s.produce(P, "__consumer_offsets", s.batch(b"a"))]),
    Scenario(
        "produce to an invalid topic name",
        [s.produce(P, "~bad/name", s.batch(b"a")), s.produce(P, "", s.batch(b"a"))],
    ),
    Scenario(
        "produce several partitions in one request",
        [
            s.topic(T, 3),
            produce_to_partitions(
                *({"index": i, "records": s.batch(b"v%d" % i)} for i in (0, 2, 5))
            ),
            s.list_offsets(C, T, partition=2),
        ],
    ),
    Scenario(
        "produce one partition twice in one request",
        [
            s.topic(T),
            produce_to_partitions(
                {"index": 0, "records": s.batch(b"a")}, {"index": 0, "records": s.batch(b"b")}
            ),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "record larger than max.message.bytes",
        [
            s.topic(T, configs={"max.message.bytes": "200"}),
            s.produce(P, T, s.batch(b"x" * 400)),
            s.produce(P, T, s.batch(b"small")),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "timestamp past message.timestamp.after.max.ms",
        [
            s.topic(T, configs={"message.timestamp.after.max.ms": "3600000"}),
            s.produce(P, T, s.batch(b"future", timestamp_ms=4_102_444_800_000)),
            s.produce(P, T, s.batch(b"now")),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "timestamp before message.timestamp.before.max.ms",
        [
            s.topic(T, configs={"message.timestamp.before.max.ms": "3600000"}),
            s.produce(P, T, s.batch(b"old", timestamp_ms=1_000_000_000_000)),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "log append time topic",
        [
            s.topic(T, configs={"message.timestamp.type": "LogAppendTime"}),
            s.produce(P, T, s.batch(b"a", b"b")),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "compacted topic refuses null keys",
        [
            s.topic(T, configs={"cleanup.policy": "compact"}),
            s.produce(P, T, s.batch(b"nokey")),
            s.produce(P, T, s.batch(b"v", keys=(b"k",))),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "records with headers",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"v", headers=((b"h1", b"x"), (b"h2", None)))),
            s.fetch(C, T),
        ],
    ),
    # ---- idempotence
    Scenario(
        "idempotent in order",
        idem(
            s.produce(P, T, b(b"a", b"b", seq=0)),
            s.produce(P, T, b(b"c", seq=2)),
            *s.offsets_view(C, T),
            s.describe_producers(T),
        ),
    ),
    Scenario(
        "idempotent duplicate of the last batch",
        idem(
            s.produce(P, T, b(b"a", b"b", seq=0)),
            s.produce(P, T, b(b"a", b"b", seq=0)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent duplicate of an earlier batch",
        idem(
            *[s.produce(P, T, b(b"v%d" % i, seq=i)) for i in range(4)],
            s.produce(P, T, b(b"v1", seq=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent duplicate beyond five batches",
        idem(
            *[s.produce(P, T, b(b"v%d" % i, seq=i)) for i in range(7)],
            s.produce(P, T, b(b"v0", seq=0)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent gap in sequence",
        idem(
            s.produce(P, T, b(b"a", seq=0)), s.produce(P, T, b(b"c", seq=2)), *s.offsets_view(C, T)
        ),
    ),
    Scenario(
        "idempotent sequence from the past",
        idem(
            s.produce(P, T, b(b"a", b"b", b"c", seq=0)),
            s.produce(P, T, b(b"b", seq=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent overlapping batch",
        idem(
            s.produce(P, T, b(b"a", b"b", seq=0)),
            s.produce(P, T, b(b"b", b"c", seq=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent first sequence not zero",
        idem(s.produce(P, T, b(b"a", seq=5)), *s.offsets_view(C, T)),
    ),
    Scenario(
        "idempotent negative sequence",
        idem(
            s.produce(P, T, b(b"a", seq=-1)),
            s.produce(P, T, b(b"a", seq=-7)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent client epoch bump restarts at zero",
        idem(
            s.produce(P, T, b(b"a", seq=0)),
            s.produce(P, T, b(b"b", seq=0, epoch_offset=1)),
            s.produce(P, T, b(b"c", seq=1, epoch_offset=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent epoch bump with sequence not zero",
        idem(
            s.produce(P, T, b(b"a", seq=0)),
            s.produce(P, T, b(b"b", seq=1, epoch_offset=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent stale epoch after bump",
        idem(
            s.produce(P, T, b(b"a", seq=0)),
            s.produce(P, T, b(b"b", seq=0, epoch_offset=1)),
            s.produce(P, T, b(b"c", seq=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent unknown producer id",
        [
            s.topic(T),
            s.produce(P, T, Batch((b"a",), None, 0)),
            s.produce(P, T, s.batch(b"a", sequence=0)),
        ],
    ),
    Scenario(
        "idempotent two producers interleaved",
        [
            s.topic(T),
            s.init_producer_id("p1"),
            s.init_producer_id("p2"),
            s.produce("p1", T, b(b"1a", seq=0, producer="p1")),
            s.produce("p2", T, b(b"2a", seq=0, producer="p2")),
            s.produce("p1", T, b(b"1b", seq=1, producer="p1")),
            s.produce("p2", T, b(b"2a", seq=0, producer="p2")),
            s.produce("p2", T, b(b"2c", seq=2, producer="p2")),
            *s.offsets_view(C, T),
            s.describe_producers(T),
        ],
    ),
    Scenario(
        "idempotent sequences per partition",
        [
            s.topic(T, 2),
            s.init_producer_id(P),
            s.produce(P, T, b(b"a", seq=0), partition=0),
            s.produce(P, T, b(b"b", seq=0), partition=1),
            s.produce(P, T, b(b"c", seq=1), partition=1),
            s.produce(P, T, b(b"d", seq=2), partition=0),
            s.describe_producers(T, [0, 1]),
        ],
    ),
    Scenario(
        "re-init gives a new producer",
        idem(
            s.produce(P, T, b(b"a", seq=0)),
            s.init_producer_id(P),
            s.produce(P, T, b(b"b", seq=0)),
            s.produce(P, T, b(b"c", seq=1)),
            *s.offsets_view(C, T),
        ),
    ),
    Scenario(
        "init producer id idempotent with pid and epoch",
        idem(s.init_producer_id(P, with_epoch=True), s.produce(P, T, b(b"a", seq=0))),
    ),
    Scenario(
        "transactional batch without transaction",
        idem(s.produce(P, T, b(b"a", seq=0, transactional=True)), *s.offsets_view(C, T)),
    ),
    Scenario(
        "produce with transactional id never initialised",
        [
            s.topic(T),
            s.produce(P, T, b(b"a", seq=0, transactional=True), transactional_id="~never"),
        ],
    ),
    # ---- fetch and list offsets
    Scenario(
        "fetch out of range",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a")),
            s.fetch(C, T, 5),
            s.fetch(C, T, -1),
            s.fetch(C, T, 1),
        ],
    ),
    Scenario(
        "fetch in the middle of a batch",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a", b"b", b"c")),
            s.fetch(C, T, 1),
            s.fetch(C, T, 2),
        ],
    ),
    Scenario(
        "fetch with a tiny limit",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a" * 100)),
            s.produce(P, T, s.batch(b"b" * 100)),
            s.fetch(C, T, 0, max_bytes=10),
            s.fetch(C, T, 0, max_bytes=150),
        ],
    ),
    Scenario(
        "fetch unknown topic and partition",
        [s.topic(T), s.fetch(C, "~absent"), s.fetch(C, T, partition=4)],
    ),
    Scenario(
        "fetch several partitions",
        [
            s.topic(T, 3),
            s.produce(P, T, s.batch(b"x"), partition=1),
            Step(
                C,
                1,
                {
                    "max_wait": 0,
                    "min_bytes": 0,
                    "topics": [
                        {
                            "topic": T,
                            "topic_id": s.TopicId(T),
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
            s.topic(T),
            Step(
                C,
                1,
                {
                    "max_wait": 200,
                    "min_bytes": 1,
                    "topics": [
                        {
                            "topic": T,
                            "topic_id": s.TopicId(T),
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
            s.topic(T),
            s.produce(P, T, s.batch(b"a", b"b", b"c")),
            s.produce(P, T, s.batch(b"d", timestamp_ms=BASE_TIME_MS + 10)),
            *[
                s.list_offsets(C, T, ts)
                for ts in (
                    BASE_TIME_MS - 5,
                    BASE_TIME_MS,
                    BASE_TIME_MS + 1,
                    BASE_TIME_MS + 2,
                    BASE_TIME_MS + 5,
                    BASE_TIME_MS + 10,
                    BASE_TIME_MS + 11,
                    s.MAX_TIMESTAMP,
                    -4,
                    -5,
                )
            ],
        ],
    ),
    Scenario(
        "list offsets on an empty topic",
        [s.topic(T), *[s.list_offsets(C, T, ts) for ts in (-1, -2, -3, -4, -5, BASE_TIME_MS)]],
    ),
    Scenario(
        "list offsets invalid timestamp",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a")),
            s.list_offsets(C, T, -6),
            s.list_offsets(C, T, -100),
        ],
    ),
    Scenario(
        "list offsets unknown topic and partition",
        [s.topic(T), s.list_offsets(C, "~absent"), s.list_offsets(C, T, partition=7)],
    ),
    Scenario(
        "list offsets old versions",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a", b"b")),
            *[s.list_offsets(C, T, -1, version=v) for v in (1, 2, 4, 6, 7, 8)],
        ],
    ),
    Scenario(
        "produce and fetch old versions",
        [
            s.topic(T),
            *[s.produce(P, T, s.batch(b"v%d" % v), version=v) for v in (3, 5, 7, 8, 9, 10)],
            *[s.fetch(C, T, 0, version=v) for v in (4, 7, 11, 12, 13, 15, 16)],
        ],
    ),
)

SCENARIOS += [  # found by the generated sequences
    Scenario(
        "acks=0 produce that fails closes the connection",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a"), partition=5, acks=0),
            s.barrier(P),
            s.produce(P, "~absent", s.batch(b"b"), acks=0),
            s.barrier(P),
            s.produce(P, T, s.batch(b"c"), acks=0),
            s.produce(P, T, s.batch(b"d"), acks=1),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "fetch limit ends inside the second batch",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a" * 20)),
            s.produce(P, T, s.batch(b"b" * 20)),
            s.fetch(C, T, 0, max_bytes=100),
        ],
    ),
    Scenario(
        "fetch negative max bytes",
        [s.topic(T), s.produce(P, T, s.batch(b"a")), s.fetch(C, T, 0, max_bytes=-1)],
    ),
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "produce null records": ("produce-null-records",),
        "idempotent duplicate of the last batch": ("duplicate-log-append-time",),
        "idempotent duplicate of an earlier batch": ("duplicate-log-append-time",),
        "idempotent two producers interleaved": ("duplicate-log-append-time",),
        "fetch negative max bytes": ("fetch-negative-max-bytes",),
        "fetch limit ends inside the second batch": ("fetch-partial-batch",),
        "produce with transactional id never initialised": (
            "transactional-batch-without-producer-id",
        ),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
