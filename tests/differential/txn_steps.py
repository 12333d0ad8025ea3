"""Step builders for producer ids and transactions: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn (and waiting for its markers), DescribeProducers,
DescribeTransactions and ListTransactions. Scenarios import this module as ``xs``."""

from __future__ import annotations

from typing import Any

from tests.differential.driver import Step
from tests.differential.step_values import ADMIN, committed_topics, epoch, pid


def init_producer_id(
    client: str,
    transactional_id: str | None = None,
    timeout_ms: int = 60000,
    with_epoch: bool = False,
    version: int | None = None,
    label: str = "",
) -> Step:
    """InitProducerId, repeated while the broker answers COORDINATOR_LOAD_IN_PROGRESS (a
    new block of producer ids is on its way) or CONCURRENT_TRANSACTIONS (the previous
    transaction is still being completed), as every client does; the last answer counts."""
    return Step(
        client,
        22,
        {
            "transactional_id": transactional_id,
            "transaction_timeout": timeout_ms,
            "producer_id": pid(client) if with_epoch else -1,
            "producer_epoch": epoch(client) if with_epoch else -1,
        },
        version,
        label=label or f"init producer id {client}",
        wait_until=lambda r: r.error_code not in (14, 51),
    )


def add_partitions(
    client: str, transactional_id: str, topics: dict[str, list[int]], version: int = 3
) -> Step:
    return Step(
        client,
        24,
        {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": pid(client),
            "v3_and_below_producer_epoch": epoch(client),
            "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()],
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client),
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
        },
        version,
    )


def add_offsets(client: str, transactional_id: str, group: str, epoch_offset: int = 0) -> Step:
    return Step(
        client,
        25,
        {
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "group_id": group,
        },
    )


def txn_offset_commit(
    client: str,
    transactional_id: str,
    group: str,
    offsets: dict[str, list[tuple[int, int]]],
    generation_id: Any = -1,
    member_id: Any = "",
    epoch_offset: int = 0,
    version: int | None = None,
) -> Step:
    return Step(
        client,
        28,
        {
            "transactional_id": transactional_id,
            "group_id": group,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": committed_topics(offsets, ""),
        },
        version,
    )


def end_txn(
    client: str,
    transactional_id: str,
    commit: bool,
    epoch_offset: int = 0,
    version: int | None = None,
) -> Step:
    return Step(
        client,
        26,
        {
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "committed": commit,
        },
        version,
        label="commit" if commit else "abort",
    )


def describe_transactions(ids: list[str], client: str = ADMIN, **kw) -> Step:
    return Step(client, 65, {"transactional_ids": ids}, **kw)


def txn_settled(transactional_id: str) -> Step:
    """Wait until the transaction's markers are written (Kafka writes them after it
    answers EndTxn: the state leaves PrepareCommit/PrepareAbort/PrepareEpochFence); the
    answer itself is not compared."""
    step = describe_transactions([transactional_id], compare=False, label="markers written")
    step.wait_until = lambda r: not r.transaction_states[0].transaction_state.startswith("Prepare")
    return step


def describe_producers(topic_name: str, partitions: list[int] | None = None) -> Step:
    return Step(
        ADMIN, 61, {"topics": [{"name": topic_name, "partition_indexes": partitions or [0]}]}
    )


def list_transactions(
    states: list[str] | None = None, pids: list[Any] | None = None, duration: int = -1
) -> Step:
    return Step(
        ADMIN,
        66,
        {
            "state_filters": states or [],
            "producer_id_filters": pids or [],
            "duration_filter": duration,
        },
    )
