"""Shorthands of the transaction scenarios: their clients, topics, transactional id
and group, transactions v1 (AddPartitionsToTxn, EndTxn v4) and v2 (Produce v12 adds the
partition, EndTxn v5 bumps the epoch), and a transaction's begin, produce and end, and
what readers see."""

from __future__ import annotations

from tests.differential import record_steps as rs
from tests.differential import txn_steps as xs

P, P2, C = "p1", "p2", "c1"
T, T2, X, G = "~t", "~u", "~tx", "~g"
V1 = {"produce": 11, "end": 4}
V2 = {"produce": 12, "end": 5}


def tbatch(*values: bytes, seq: int = 0, producer: str = P, **kw):
    return rs.batch(*values, producer=producer, sequence=seq, transactional=True, **kw)


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
    return rs.produce(
        producer,
        topic,
        tbatch(*values, seq=seq, producer=producer, **kw),
        partition,
        transactional_id=tx,
        version=mode["produce"],
    )


def begin(mode=V1, producer: str = P, tx: str = X, topics=(T,), timeout_ms: int = 60000) -> list:
    steps = [xs.init_producer_id(producer, tx, timeout_ms)]
    if mode is V1:
        steps.append(xs.add_partitions(producer, tx, {t: [0] for t in topics}))
    return steps


def end(commit: bool, mode=V1, producer: str = P, tx: str = X) -> list:
    return [xs.end_txn(producer, tx, commit, version=mode["end"]), xs.txn_settled(tx)]


def view(topic: str = T) -> list:
    return [*rs.offsets_view(C, topic), xs.describe_producers(topic)]
