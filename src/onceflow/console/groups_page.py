"""Consumer groups with their lag, to the last stable offset (what a ``read_committed``
consumer can still read) and to the high watermark (what is written); a group's members,
its partitions, and for a partition it cannot get past, the transaction that holds it."""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow.admin.connect import ClusterSession
from onceflow.admin.groups import (
    GroupDescription,
    GroupListing,
    describe_group,
    list_groups,
    log_offsets,
)
from onceflow.admin.transactions import describe_producers, describe_transactions, list_transactions
from onceflow.clock import now_ms


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group has committed nothing here
    stable: int | None
    high_watermark: int | None
    owner: str | None = None  # the member assigned it
    blocked_by: Blocker | None = None

    @property
    def lag_to_stable(self) -> int | None:
        return _lag(self.stable, self.committed)

    @property
    def lag_to_end(self) -> int | None:
        return _lag(self.high_watermark, self.committed)

    @property
    def waiting(self) -> bool:
        """Read all it may under read_committed, yet records are written past that."""
        return self.lag_to_stable == 0 and bool(self.lag_to_end)


@dataclass(frozen=True, slots=True)
class Blocker:
    """The open transaction whose first record is a partition's LSO."""

    producer_id: int
    producer_epoch: int
    start_offset: int
    transactional_id: str | None
    state: str | None
    open_for_ms: int | None
    timeout_ms: int | None


@dataclass(frozen=True, slots=True)
class GroupRow:
    listing: GroupListing
    lag_to_stable: int | None
    lag_to_end: int | None


def _lag(end: int | None, committed: int | None) -> int | None:
    if end is None or committed is None or committed < 0:
        return None
    return max(end - committed, 0)


def groups(
    session: ClusterSession, page: list[int], search: str = "", internal: bool = False
) -> tuple[list[GroupRow], int]:
    """One page of the groups whose id contains ``search``, each with its total lag; and
    how many there are."""
    listings = [g for g in list_groups(session, internal=internal) if search in g.group]
    first, count = page
    shown = listings[first : first + count]
    committed = _committed(session, [g.group for g in shown])
    partitions = sorted({tp for offsets in committed.values() for tp in offsets})
    ends = log_offsets(session, partitions)
    stable = log_offsets(session, partitions, read_committed=True)
    rows = []
    for listing in shown:
        offsets = committed.get(listing.group, {})
        to_stable = [_lag(stable.get(tp), at) for tp, at in offsets.items()]
        to_end = [_lag(ends.get(tp), at) for tp, at in offsets.items()]
        rows.append(GroupRow(listing, _sum(to_stable), _sum(to_end)))
    return rows, len(listings)


def _sum(lags: list[int | None]) -> int | None:
    known = [lag for lag in lags if lag is not None]
    return sum(known) if known else None


def _committed(session: ClusterSession, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed offsets, asked of their coordinators at once."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = {
        group: session.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=session.timeout
        )[group]
        for group in groups
    }
    found = {}
    for group, future in futures.items():
        result = session.result(future, f"offsets of group {group}")
        found[group] = {
            (tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions or ()
            if tp.error is None
        }
    return found


@dataclass(frozen=True, slots=True)
class GroupView:
    description: GroupDescription
    partitions: list[PartitionLag] = field(default_factory=list)

    @property
    def waiting(self) -> list[PartitionLag]:
        return [p for p in self.partitions if p.waiting]


def group(session: ClusterSession, group_id: str) -> GroupView:
    """Members, and per partition (assigned or committed) the lag to the LSO and to the
    high watermark; a partition the group waits on names the transaction holding it."""
    description = describe_group(session, group_id)
    owners = {tp: m.client_id or m.member_id for m in description.members for tp in m.partitions}
    offsets = _committed(session, [group_id])[group_id]
    keys = sorted(set(offsets) | set(owners))
    ends = log_offsets(session, keys)
    stable = log_offsets(session, keys, read_committed=True)
    rows = [
        PartitionLag(
            topic,
            partition,
            offsets.get((topic, partition)),
            stable.get((topic, partition)),
            ends.get((topic, partition)),
            owners.get((topic, partition)),
        )
        for topic, partition in keys
    ]
    waiting = [row for row in rows if row.waiting]
    blockers = _blockers(session, [(row.topic, row.partition, row.stable) for row in waiting])
    rows = [
        PartitionLag(
            r.topic,
            r.partition,
            r.committed,
            r.stable,
            r.high_watermark,
            r.owner,
            blockers.get((r.topic, r.partition)),
        )
        for r in rows
    ]
    return GroupView(description, rows)


def _blockers(
    session: ClusterSession, partitions: list[tuple[str, int, int | None]]
) -> dict[tuple[str, int], Blocker]:
    """For each (topic, partition, LSO), the open transaction starting at the LSO."""
    found: dict[tuple[str, int], Blocker] = {}
    by_topic: dict[str, dict[int, int]] = {}
    for topic, partition, stable in partitions:
        if stable is not None:
            by_topic.setdefault(topic, {})[partition] = stable
    producers = [
        state
        for topic, wanted in by_topic.items()
        for state in describe_producers(session, topic, sorted(wanted))
        if state.txn_start_offset == wanted.get(state.partition)
    ]
    if not producers:
        return found
    ids = {
        t.producer_id: t.transactional_id
        for t in list_transactions(session, (), tuple(sorted({p.producer_id for p in producers})))
    }
    descriptions = describe_transactions(session, sorted(set(ids.values())))
    now = now_ms()
    for state in producers:
        transactional_id = ids.get(state.producer_id)
        described = descriptions.get(transactional_id) if transactional_id else None
        found[(state.topic, state.partition)] = Blocker(
            state.producer_id,
            state.producer_epoch,
            state.txn_start_offset,
            transactional_id,
            described.state if described else None,
            described.open_for_ms(now) if described else None,
            described.timeout_ms if described else None,
        )
    return found
