"""Idempotent Produce: sequences in order, duplicates, gaps, overlaps, epochs bumped by
the client, unknown producer ids, several producers and partitions, and transactional
batches outside a transaction."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.records import Batch
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

P, C = "p1", "c1"
T = "~t"


def b(*values: bytes, seq: int = -1, producer: str | None = P, **kw) -> Batch:
    return rs.batch(*values, producer=producer, sequence=seq, **kw)


def idem(*steps_after) -> list:
    return [ts.topic(T), xs.init_producer_id(P), *steps_after]


SCENARIOS = scenarios(
    Scenario(
        "idempotent in order",
        idem(
            rs.produce(P, T, b(b"a", b"b", seq=0)),
            rs.produce(P, T, b(b"c", seq=2)),
            *rs.offsets_view(C, T),
            xs.describe_producers(T),
        ),
    ),
    Scenario(
        "idempotent duplicate of the last batch",
        idem(
            rs.produce(P, T, b(b"a", b"b", seq=0)),
            rs.produce(P, T, b(b"a", b"b", seq=0)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent duplicate of an earlier batch",
        idem(
            *[rs.produce(P, T, b(b"v%d" % i, seq=i)) for i in range(4)],
            rs.produce(P, T, b(b"v1", seq=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent duplicate beyond five batches",
        idem(
            *[rs.produce(P, T, b(b"v%d" % i, seq=i)) for i in range(7)],
            rs.produce(P, T, b(b"v0", seq=0)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent gap in sequence",
        idem(
            rs.produce(P, T, b(b"a", seq=0)),
            rs.produce(P, T, b(b"c", seq=2)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent sequence from the past",
        idem(
            rs.produce(P, T, b(b"a", b"b", b"c", seq=0)),
            rs.produce(P, T, b(b"b", seq=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent overlapping batch",
        idem(
            rs.produce(P, T, b(b"a", b"b", seq=0)),
            rs.produce(P, T, b(b"b", b"c", seq=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent first sequence not zero",
        idem(rs.produce(P, T, b(b"a", seq=5)), *rs.offsets_view(C, T)),
    ),
    Scenario(
        "idempotent negative sequence",
        idem(
            rs.produce(P, T, b(b"a", seq=-1)),
            rs.produce(P, T, b(b"a", seq=-7)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent client epoch bump restarts at zero",
        idem(
            rs.produce(P, T, b(b"a", seq=0)),
            rs.produce(P, T, b(b"b", seq=0, epoch_offset=1)),
            rs.produce(P, T, b(b"c", seq=1, epoch_offset=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent epoch bump with sequence not zero",
        idem(
            rs.produce(P, T, b(b"a", seq=0)),
            rs.produce(P, T, b(b"b", seq=1, epoch_offset=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent stale epoch after bump",
        idem(
            rs.produce(P, T, b(b"a", seq=0)),
            rs.produce(P, T, b(b"b", seq=0, epoch_offset=1)),
            rs.produce(P, T, b(b"c", seq=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "idempotent unknown producer id",
        [
            ts.topic(T),
            rs.produce(P, T, Batch((b"a",), None, 0)),
            rs.produce(P, T, rs.batch(b"a", sequence=0)),
        ],
    ),
    Scenario(
        "idempotent two producers interleaved",
        [
            ts.topic(T),
            xs.init_producer_id("p1"),
            xs.init_producer_id("p2"),
            rs.produce("p1", T, b(b"1a", seq=0, producer="p1")),
            rs.produce("p2", T, b(b"2a", seq=0, producer="p2")),
            rs.produce("p1", T, b(b"1b", seq=1, producer="p1")),
            rs.produce("p2", T, b(b"2a", seq=0, producer="p2")),
            rs.produce("p2", T, b(b"2c", seq=2, producer="p2")),
            *rs.offsets_view(C, T),
            xs.describe_producers(T),
        ],
    ),
    Scenario(
        "idempotent sequences per partition",
        [
            ts.topic(T, 2),
            xs.init_producer_id(P),
            rs.produce(P, T, b(b"a", seq=0), partition=0),
            rs.produce(P, T, b(b"b", seq=0), partition=1),
            rs.produce(P, T, b(b"c", seq=1), partition=1),
            rs.produce(P, T, b(b"d", seq=2), partition=0),
            xs.describe_producers(T, [0, 1]),
        ],
    ),
    Scenario(
        "re-init gives a new producer",
        idem(
            rs.produce(P, T, b(b"a", seq=0)),
            xs.init_producer_id(P),
            rs.produce(P, T, b(b"b", seq=0)),
            rs.produce(P, T, b(b"c", seq=1)),
            *rs.offsets_view(C, T),
        ),
    ),
    Scenario(
        "init producer id idempotent with pid and epoch",
        idem(xs.init_producer_id(P, with_epoch=True), rs.produce(P, T, b(b"a", seq=0))),
    ),
    Scenario(
        "transactional batch without transaction",
        idem(rs.produce(P, T, b(b"a", seq=0, transactional=True)), *rs.offsets_view(C, T)),
    ),
    Scenario(
        "produce with transactional id never initialised",
        [
            ts.topic(T),
            rs.produce(P, T, b(b"a", seq=0, transactional=True), transactional_id="~never"),
        ],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
        "idempotent duplicate of the last batch": ("duplicate-log-append-time",),
        "idempotent duplicate of an earlier batch": ("duplicate-log-append-time",),
        "idempotent two producers interleaved": ("duplicate-log-append-time",),
        "produce with transactional id never initialised": (
            "transactional-batch-without-producer-id",
        ),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
