"""Transactions: those open at their coordinators, with their age against
``transaction.timeout.ms``; and every open transaction the partitions hold, split as
``kafka-transactions find-hanging`` splits them: hanging (no coordinator will ever end it:
only an abort by hand frees the partition's LSO) or not, and why."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.admin.connect import ClusterSession
from onceflow.admin.transactions import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    ProducerState,
    TransactionDescription,
    abort_transaction,
    cluster,
    describe_transactions,
    find_open_transactions,
    list_transactions,
)
from onceflow.clock import now_ms

OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@dataclass(frozen=True, slots=True)
class OpenAtCoordinator:
    description: TransactionDescription
    open_for_ms: int | None

    @property
    def used(self) -> float | None:
        """How much of its timeout it has used (1: the coordinator aborts it now)."""
        if self.open_for_ms is None or not self.description.timeout_ms:
            return None
        return self.open_for_ms / self.description.timeout_ms


@dataclass(frozen=True, slots=True)
class OpenOnPartition:
    state: ProducerState
    hanging: bool
    why: str  # why it is not hanging ("" for a hanging one)


@dataclass(frozen=True, slots=True)
class TransactionsView:
    at_coordinators: list[OpenAtCoordinator]
    on_partitions: list[OpenOnPartition]
    max_transaction_timeout_min: int

    @property
    def hanging(self) -> list[OpenOnPartition]:
        return [t for t in self.on_partitions if t.hanging]


def transactions(
    session: ClusterSession, max_transaction_timeout_min: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN
) -> TransactionsView:
    listed = list_transactions(session, OPEN_STATES)
    described = describe_transactions(session, sorted({t.transactional_id for t in listed}))
    now = now_ms()
    at_coordinators = [
        OpenAtCoordinator(d, d.open_for_ms(now))
        for d in sorted(described.values(), key=lambda d: d.start_time_ms or 0)
    ]
    on_partitions: dict[tuple[str, int, int], OpenOnPartition] = {}
    for broker_id in sorted(cluster(session).brokers):
        found = find_open_transactions(
            session, broker_id=broker_id, max_transaction_timeout_min=max_transaction_timeout_min
        )
        for state in found.hanging:
            on_partitions[_key(state)] = OpenOnPartition(state, True, "")
        for state, why in found.not_hanging:
            on_partitions.setdefault(_key(state), OpenOnPartition(state, False, why))
    return TransactionsView(
        at_coordinators,
        sorted(on_partitions.values(), key=lambda t: _key(t.state)),
        max_transaction_timeout_min,
    )


def _key(state: ProducerState) -> tuple[str, int, int]:
    return state.topic, state.partition, state.producer_id


def abort(session: ClusterSession, topic: str, partition: int, start_offset: int) -> str:
    """Abort the open transaction starting at ``start_offset`` of a partition (an abort
    marker written there, as kafka-transactions abort does); what was done."""
    found = abort_transaction(session, topic, partition, start_offset=start_offset)
    producer = f"producer {found.producer_id}" if found is not None else "its producer"
    return (
        f"aborted the transaction of {producer} that started at offset {start_offset} "
        f"of {topic}:{partition}"
    )
