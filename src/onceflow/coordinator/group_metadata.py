"""One consumer group's state: members, generation, protocol, committed offsets.

This mirrors Kafka's ``GroupMetadata`` for the classic protocol. It holds no timers and
does no I/O; the group coordinator (:mod:`onceflow.coordinator.classic_protocol`) drives it. The
asyncio futures on a member are the responses it is waiting for (JoinGroup, SyncGroup).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onceflow.coordinator.group_records import JoinedMember, subscribed_topics
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.coordinator.consumer_group import ConsumerGroup

CONSUMER_PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]


class GroupState(enum.StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's valid previous states for each state.
VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: {
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
        GroupState.DEAD,
    },
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup request is answered with."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # (member id, group instance id, metadata): only the leader gets them
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    append_offset: int  # where the commit record sits in __consumer_offsets (ordering)

    def older_than(self, other: CommittedOffset) -> bool:
        return self.append_offset < other.append_offset


@dataclass(eq=False, slots=True)
class Member(JoinedMember):
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    last_heartbeat: float = 0.0  # time.monotonic()
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names if name in candidates)

    def answer_join(self, result: JoinResult) -> bool:
        future, self.join_future = self.join_future, None
        return _answer(future, result)

    def answer_sync(self, result: SyncResult) -> bool:
        future, self.sync_future = self.sync_future, None
        return _answer(future, result)


def _answer(future: asyncio.Future | None, result: object) -> bool:
    """Resolve a waiting JoinGroup or SyncGroup; False if none was waiting."""
    if future is None or future.done():
        return False
    future.set_result(result)
    return True


class Group:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = -1  # wall-clock ms of the last transition
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, float] = {}  # member-id-required: id -> deadline
        self.pending_sync: set[str] = set()
        self.subscribed: set[str] | None = None  # topics, for consumer groups
        self.new_member_added = False
        # timers (time.monotonic() deadlines), driven by the coordinator
        self.join_deadline: float | None = None
        self.initial_join_limit: float | None = None  # set while in the initial delay
        self.sync_deadline: float | None = None
        # offsets
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: Counter[TopicPartition] = Counter()
        self.pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = {}
        # Set while the group is a KIP-848 consumer group (the members live there).
        self.consumer: ConsumerGroup | None = None

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # -- state ----------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state == state

    def transition(self, state: GroupState, now_ms: int = -1) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members --------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A static member's instance id is now registered to a different member id."""
        registered = self.static_member_id(group_instance_id)
        return registered is not None and registered != member_id

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        # Fence whoever still waits with the old id.
        member.answer_join(JoinResult(ErrorCode.fenced_instance_id, old_id))
        member.answer_sync(SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[group_instance_id] = new_id
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [member for member in self.members.values() if not member.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if none rejoined."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def max_rebalance_timeout_ms(self, default: int) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=default)

    # -- protocols ------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        counts = Counter(name for m in self.members.values() for name in set(m.protocol_names))
        return {name for name, count in counts.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != self.protocol_type or not protocol_names:
            return False
        if not self.members:
            return True
        return bool(set(protocol_names) & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins.

        Ties go to the protocol the leader prefers (Kafka leaves ties unspecified).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise RuntimeError(f"group {self.group_id} has no protocol every member supports")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        leader = self.members.get(self.leader_id or "")
        preference = leader.protocol_names if leader is not None else sorted(candidates)
        best = max(votes.values())
        return next(name for name in preference if votes.get(name) == best)

    def init_next_generation(self, now_ms: int = -1) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = self.compute_subscribed_topics()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed = None
            self.transition(GroupState.EMPTY, now_ms)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Conservatively true when the subscriptions are unknown."""
        return self.subscribed is None or topic in self.subscribed

    # -- offsets --------------------------------------------------------------------------

    def has_pending_offsets(self, topic_partition: TopicPartition) -> bool:
        if self.pending_offset_commits.get(topic_partition):
            return True
        return any(topic_partition in p for p in self.pending_txn_offsets.values())

    def apply_offset(self, topic_partition: TopicPartition, committed: CommittedOffset) -> None:
        current = self.offsets.get(topic_partition)
        if current is None or current.older_than(committed):
            self.offsets[topic_partition] = committed

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> bool:
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None:
            return False
        if committed:
            for topic_partition, offset in pending.items():
                self.apply_offset(topic_partition, offset)
        return True

    def is_removable(self) -> bool:
        """Empty with nothing stored: Kafka's cleanup would mark it Dead."""
        return (
            self.state == GroupState.EMPTY
            and (self.consumer is None or self.consumer.is_empty())
            and not self.members
            and not self.offsets
            and not self.pending_txn_offsets
            and not self.pending_offset_commits
        )


class GroupTable(dict[str, Group]):
    """Every group the coordinator knows, by id."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        super().__init__()
        self._now_ms = now_ms

    def get_or_create(self, group_id: str) -> Group:
        group = self.get(group_id)
        if group is None:
            group = self[group_id] = self.detached(group_id)
        return group

    def detached(self, group_id: str) -> Group:
        """A new group not (yet) in the table."""
        group = Group(group_id)
        group.state_timestamp = self._now_ms()
        return group
