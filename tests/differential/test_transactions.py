"""Transactions, step by step, with what readers see after each step: AddPartitionsToTxn,
transactional Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, fencing by a new
InitProducerId, timeouts; transactions v1 (AddPartitionsToTxn, EndTxn v4) and v2
(Produce v12 adds the partition, EndTxn v5 bumps the epoch)."""

from __future__ import annotations

import pytest

from tests.differential import steps as s
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

P, P2, C = "p1", "p2", "c1"
T, T2, X, G = "~t", "~u", "~tx", "~g"
V1 = {"produce": 11, "end": 4}
V2 = {"produce": 12, "end": 5}


def tbatch(*values: bytes, seq: int = 0, producer: str = P, **kw):
    return s.batch(*values, producer=producer, sequence=seq, transactional=True, **kw)


def tproduce(
    values: tuple[bytes, ...],
    seq: int = 0,
    producer: str = P,
    topic: str = T,
    tx: str = X,
    mode=V1,
    partition: int = 0,
    **kw,
):
    return s.produce(
        producer,
        topic,
        tbatch(*values, seq=seq, producer=producer, **kw),
        partition,
        transactional_id=tx,
        version=mode["produce"],
    )


def begin(mode=V1, producer: str = P, tx: str = X, topics=(T,), timeout_ms: int = 60000) -> list:
    steps = [s.init_producer_id(producer, tx, timeout_ms)]
    if mode is V1:
        steps.append(s.add_partitions(producer, tx, {t: [0] for t in topics}))
    return steps


def end(commit: bool, mode=V1, producer: str = P, tx: str = X) -> list:
    return [s.end_txn(producer, tx, commit, version=mode["end"]), s.txn_settled(tx)]


def view(topic: str = T) -> list:
    return [*s.offsets_view(C, topic), s.describe_producers(topic)]


def basic(commit: bool, mode) -> list:
    return [
        s.topic(T),
        *begin(mode),
        tproduce((b"a", b"b"), mode=mode),
        *view(),
        s.describe_transactions([X]),
        *end(commit, mode),
        *view(),
        s.describe_transactions([X]),
    ]


def with_offsets(commit: bool, mode) -> list:
    return [
        s.topic(T),
        *begin(mode),
        tproduce((b"a",), mode=mode),
        s.add_offsets(P, X, G),
        s.txn_offset_commit(P, X, G, {T: [(0, 1)]}),
        s.offset_fetch(C, G, {T: [0]}),
        s.offset_fetch(C, G, {T: [0]}, require_stable=True),
        *end(commit, mode),
        s.offset_fetch(C, G, {T: [0]}),
        s.offset_fetch(C, G, {T: [0]}, require_stable=True),
        *view(),
    ]


SCENARIOS = scenarios(
    *[
        Scenario(f"txn {name} {label}", build(commit, mode))
        for name, mode in (("v1", V1), ("v2", V2))
        for label, commit in (("commit", True), ("abort", False))
        for build in (basic,)
    ],
    *[
        Scenario(f"txn offsets {name} {label}", with_offsets(commit, mode))
        for name, mode in (("v1", V1), ("v2", V2))
        for label, commit in (("commit", True), ("abort", False))
    ],
    Scenario(
        "txn produce before add partitions (v1)",
        [s.topic(T), s.init_producer_id(P, X), tproduce((b"a",)), *view()],
    ),
    Scenario(
        "txn add partitions twice",
        [
            s.topic(T),
            *begin(),
            s.add_partitions(P, X, {T: [0]}),
            tproduce((b"a",)),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn add unknown topic and partition",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.add_partitions(P, X, {T: [0, 3], "~absent": [0]}),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn add partitions wrong producer id",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.init_producer_id(P2),
            s.add_partitions(P2, X, {T: [0]}),
        ],
    ),
    Scenario(
        "txn add partitions stale epoch",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.init_producer_id(P, X),
            s.add_partitions(P, X, {T: [0]}),
            s.Step(
                P,
                24,
                {
                    "v3_and_below_transactional_id": X,
                    "v3_and_below_producer_id": s.pid(P),
                    "v3_and_below_producer_epoch": s.epoch(P, -1),
                    "v3_and_below_topics": [{"name": T, "partitions": [0]}],
                },
                3,
            ),
        ],
    ),
    Scenario(
        "txn add partitions unknown transactional id",
        [s.topic(T), s.init_producer_id(P), s.add_partitions(P, "~unknown", {T: [0]})],
    ),
    Scenario(
        "txn end with nothing begun",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.end_txn(P, X, True, version=4),
            s.end_txn(P, X, False, version=4),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn end unknown transactional id",
        [s.init_producer_id(P), s.end_txn(P, "~unknown", True, version=4)],
    ),
    Scenario(
        "txn end wrong epoch",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            s.end_txn(P, X, True, epoch_offset=1, version=4),
            s.end_txn(P, X, True, epoch_offset=-1, version=4),
            *end(False),
            *view(),
        ],
    ),
    Scenario(
        "txn commit then commit again",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(True),
            s.end_txn(P, X, True, version=4),
            s.end_txn(P, X, False, version=4),
            *view(),
        ],
    ),
    Scenario(
        "txn abort then commit",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(False),
            s.end_txn(P, X, True, version=4),
            *view(),
        ],
    ),
    Scenario(
        "txn empty commit", [s.init_producer_id(P, X), *end(True), s.describe_transactions([X])]
    ),
    Scenario(
        "txn two transactions in a row",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            *end(True),
            s.add_partitions(P, X, {T: [0]}),
            tproduce((b"b",), seq=1),
            *end(False),
            s.add_partitions(P, X, {T: [0]}),
            tproduce((b"c",), seq=2),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 two transactions in a row",
        [
            s.topic(T),
            s.init_producer_id(P, X),
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
        "txn fenced by a new init",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            s.init_producer_id(P2, X),
            tproduce((b"b",), seq=1),
            s.end_txn(P, X, True, version=4),
            s.txn_settled(X),
            *view(),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn new producer after fencing commits",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            s.init_producer_id(P2, X),
            s.add_partitions(P2, X, {T: [0]}),
            tproduce((b"b",), producer=P2),
            *end(True, producer=P2),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 fenced by a new init",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            tproduce((b"a",), mode=V2),
            s.init_producer_id(P2, X),
            tproduce((b"b",), seq=1, mode=V2),
            s.end_txn(P, X, True, version=5),
            s.txn_settled(X),
            *view(),
        ],
    ),
    Scenario(
        "txn re-init with producer id and epoch",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            s.init_producer_id(P, X, with_epoch=True),
            s.txn_settled(X),
            *view(),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn re-init with a wrong epoch",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.Step(
                P,
                22,
                {
                    "transactional_id": X,
                    "transaction_timeout": 60000,
                    "producer_id": s.pid(P),
                    "producer_epoch": s.epoch(P, 5),
                },
            ),
        ],
    ),
    Scenario(
        "txn timeout too large",
        [
            s.init_producer_id(P, X, timeout_ms=900001),
            s.init_producer_id(P, X, timeout_ms=0),
            s.init_producer_id(P, X, timeout_ms=-5),
        ],
    ),
    Scenario(
        "txn times out and is aborted",
        [
            s.topic(T),
            *begin(timeout_ms=1000),
            tproduce((b"a",)),
            s.Pause(4.0),
            s.txn_settled(X),
            s.describe_transactions([X]),
            *view(),
            s.end_txn(P, X, True, version=4),
            tproduce((b"b",), seq=1),
        ],
    ),
    Scenario(
        "txn offset commit without add offsets",
        [
            s.topic(T),
            *begin(),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}),
            *end(True),
            s.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn offset commit wrong epoch",
        [
            s.topic(T),
            *begin(),
            s.add_offsets(P, X, G),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=-1),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=1),
            *end(True),
            s.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn offset commit unknown topic",
        [
            s.topic(T),
            *begin(),
            s.add_offsets(P, X, G),
            s.txn_offset_commit(P, X, G, {"~absent": [(0, 5)], T: [(7, 1)]}),
            *end(True),
            s.offset_fetch(C, G, {T: [0, 7], "~absent": [0]}),
        ],
    ),
    Scenario(
        "txn offset commit with unknown member",
        [
            s.topic(T),
            *begin(),
            s.add_offsets(P, X, G),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}, generation_id=3, member_id="nobody"),
            *end(True),
            s.offset_fetch(C, G, {T: [0]}),
        ],
    ),
    Scenario(
        "txn add offsets wrong epoch",
        [
            s.topic(T),
            *begin(),
            s.add_offsets(P, X, G, epoch_offset=1),
            s.add_offsets(P, X, G, epoch_offset=-1),
            *end(False),
        ],
    ),
    Scenario(
        "txn two producers on one partition",
        [
            s.topic(T),
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
            s.topic(T),
            s.produce(P2, T, s.batch(b"plain")),
            *begin(),
            tproduce((b"t",)),
            s.produce(P2, T, s.batch(b"after")),
            *view(),
            s.list_offsets(C, T, s.BASE_TIME, isolation=s.READ_COMMITTED)
            if hasattr(s, "BASE_TIME")
            else s.list_offsets(C, T, 1_700_000_000_000, isolation=s.READ_COMMITTED),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn spanning two topics",
        [
            s.topic(T),
            s.topic(T2, 2),
            *begin(topics=(T, T2)),
            s.add_partitions(P, X, {T2: [1]}),
            tproduce((b"a",)),
            tproduce((b"b",), topic=T2),
            tproduce((b"c",), topic=T2, partition=1),
            *end(False),
            *view(),
            *view(T2),
            s.fetch(C, T2, partition=1, isolation=s.READ_COMMITTED),
        ],
    ),
    Scenario(
        "txn read committed fetch from the middle",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a", b"b", b"c")),
            *end(False),
            *begin(),
            tproduce((b"d",), seq=3),
            *end(True),
            s.fetch(C, T, 2, isolation=s.READ_COMMITTED),
            s.fetch(C, T, 4, isolation=s.READ_COMMITTED),
            s.fetch(C, T, 5, isolation=s.READ_COMMITTED),
        ],
    ),
    Scenario(
        "txn sequence gap inside a transaction",
        [
            s.topic(T),
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
            s.topic(T),
            *begin(),
            s.produce(P, T, s.batch(b"x", producer=P, sequence=0), transactional_id=X, version=11),
            *end(True),
            *view(),
        ],
    ),
    Scenario(
        "txn batch with wrong transactional id",
        [s.topic(T), *begin(), tproduce((b"a",), tx="~other"), *end(False), *view()],
    ),
    Scenario(
        "txn list transactions",
        [
            s.topic(T),
            *begin(),
            tproduce((b"a",)),
            *begin(producer=P2, tx="~tx2"),
            s.list_transactions(),
            s.list_transactions(["Ongoing"]),
            s.list_transactions(["CompleteCommit"]),
            s.list_transactions(pids=[s.pid(P)]),
            s.list_transactions(duration=3_600_000),
            *end(True),
            s.list_transactions(),
            s.list_transactions(["CompleteCommit"]),
        ],
    ),
    Scenario(
        "txn describe transactions",
        [
            s.topic(T),
            *begin(),
            s.describe_transactions([X, "~unknown", ""]),
            tproduce((b"a",)),
            s.add_offsets(P, X, G),
            s.describe_transactions([X]),
            *end(True),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn describe producers",
        [
            s.topic(T, 2),
            s.init_producer_id(P2),
            s.produce(P2, T, s.batch(b"i", producer=P2, sequence=0)),
            *begin(topics=()),
            s.add_partitions(P, X, {T: [0, 1]}),
            tproduce((b"a",)),
            s.describe_producers(T, [0, 1, 5]),
            s.describe_producers("~absent"),
            *end(True),
            s.describe_producers(T, [0, 1]),
        ],
    ),
    Scenario(
        "txn init producer id for an idempotent producer with epoch",
        [s.init_producer_id(P), s.init_producer_id(P, with_epoch=True)],
    ),
)

SCENARIOS += [
    # found by the generated sequences
    Scenario(
        "txn offset commit of an unknown topic without a producer",
        [s.topic(T), s.txn_offset_commit(P, X, G, {"~absent": [(0, 1)], T: [(0, 1)]})],
    ),
    Scenario(
        "txn abort with nothing produced leaves a marker",
        [
            s.topic(T),
            *begin(),
            *end(False),
            s.list_offsets(C, T, s.MAX_TIMESTAMP),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 abort with nothing begun",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.end_txn(P, X, False, version=5),
            s.txn_settled(X),
            s.end_txn(P, X, False, version=5),
            s.txn_settled(X),
            s.end_txn(P, X, True, version=5),
            tproduce((b"a",), mode=V2),
            *end(True, V2),
            *view(),
        ],
    ),
    Scenario(
        "txn v2 abort with nothing begun has a start time",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.describe_transactions([X]),
            s.end_txn(P, X, False, version=5),
            s.txn_settled(X),
            s.describe_transactions([X]),
        ],
    ),
    Scenario(
        "txn v2 first batch on a partition must start at sequence 0",
        [
            s.topic(T),
            s.init_producer_id(P, X),
            s.init_producer_id(P, X),
            tproduce((b"a", b"b", b"c"), seq=2, mode=V2),
            tproduce((b"a", b"b", b"c"), seq=0, mode=V2),
            tproduce((b"d",), seq=3, mode=V2),
            *end(True, V2),
            *view(),
        ],
    ),
]
SCENARIOS += [
    Scenario(
        f"txn offset commit wrong epoch v{version}",
        [
            s.topic(T),
            *begin(),
            s.add_offsets(P, X, G),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=-1, version=version),
            s.txn_offset_commit(P, X, G, {T: [(0, 5)]}, epoch_offset=1, version=version),
            *end(True),
            s.offset_fetch(C, G, {T: [0]}),
        ],
    )
    for version in (0, 2, 3, 4)
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "txn produce before add partitions (v1)": ("transaction-abortable-v11",),
        "txn re-init with producer id and epoch": ("describe-producers-epoch-after-reinit",),
        "txn sequence gap inside a transaction": ("duplicate-log-append-time",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
