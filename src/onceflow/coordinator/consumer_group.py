"""A KIP-848 consumer group (``group.protocol=consumer``): members, epochs, assignments.

It follows Apache Kafka 4.0's group coordinator:

* The **group epoch** goes up whenever membership, a subscription or the partitions of a
  subscribed topic change. The server-side assignor then computes a **target assignment**
  for that epoch (the assignment epoch).
* Each member moves to its target one heartbeat at a time. A member that owns partitions
  its target no longer has must first revoke them: it keeps its epoch, is told its
  assignment without them, and only once its heartbeat no longer lists them does it get
  the new epoch and its new partitions (``UNREVOKED_PARTITIONS``). Partitions another
  member still has to revoke are given once they are released (``UNRELEASED_PARTITIONS``).
* A member's heartbeat carries its epoch: a greater one, or a smaller one other than the
  previous epoch with a subset of its partitions, answers ``FENCED_MEMBER_EPOCH``; an
  unknown member ``UNKNOWN_MEMBER_ID``. Members silent for the session timeout, or that
  do not revoke within their rebalance timeout, are removed.
* Static members (``group.instance.id``) that leave with epoch -2 keep their assignment
  for the session timeout, so that the same instance rejoining gets it back.

The state lives in memory only: after a broker restart members are answered
``UNKNOWN_MEMBER_ID`` and rejoin (their committed offsets are durable as always).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from onceflow.coordinator.assignors import ASSIGNORS, MemberAssignment, MemberSubscription
from onceflow.protocol.errors import ErrorCode, KafkaError

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
DEFAULT_ASSIGNOR = "uniform"

TopicId = uuid.UUID


class MemberState(enum.StrEnum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What the assignor needs to know of the broker's topics."""

    ids: Mapping[str, TopicId]  # name -> id
    partitions: Mapping[TopicId, int]


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed_topic_names: list[str] | None  # None: unchanged
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: MemberAssignment | None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    assignment: MemberAssignment | None = None  # None: unchanged since the last answer


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: MemberAssignment = field(default_factory=dict)
    pending_revocation: MemberAssignment = field(default_factory=dict)
    last_heartbeat: float = 0.0
    revocation_deadline: float | None = None

    def subscribes_to(self, name: str) -> bool:
        if name in self.subscribed_topic_names:
            return True
        regex = self.subscribed_topic_regex
        return regex is not None and re.fullmatch(regex, name) is not None


def _copy(assignment: Mapping[TopicId, set[int]]) -> MemberAssignment:
    return {topic: set(numbers) for topic, numbers in assignment.items() if numbers}


def _pairs(assignment: Mapping[TopicId, set[int]]) -> set[tuple[TopicId, int]]:
    return {(topic, number) for topic, numbers in assignment.items() for number in numbers}


def _from_pairs(pairs: set[tuple[TopicId, int]]) -> MemberAssignment:
    result: MemberAssignment = {}
    for topic, number in pairs:
        result.setdefault(topic, set()).add(number)
    return result


class ConsumerGroup:
    def __init__(self, group_id: str, assignors: tuple[str, ...] = (DEFAULT_ASSIGNOR,)) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, MemberAssignment] = {}
        self.assignors = assignors
        self.assignor_name = assignors[0]
        self._subscribed_metadata: frozenset[tuple[str, TopicId, int]] = frozenset()

    # -- what the group looks like --------------------------------------------------------

    @property
    def state(self) -> str:
        """Kafka's names: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def member_by_instance(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def subscribed_topic_names(self, metadata: TopicMetadata) -> set[str]:
        return {
            name
            for name in metadata.ids
            if any(member.subscribes_to(name) for member in self.members.values())
        }

    # -- heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self, request: HeartbeatRequest, metadata: TopicMetadata, now: float
    ) -> HeartbeatResponse:
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, now)
        member = self._member_for(request, now)
        changed = self._update_subscription(member, request)
        if epoch == JOIN_EPOCH:
            changed = True
            member.assigned, member.pending_revocation = {}, {}
            member.member_epoch, member.state = JOIN_EPOCH, MemberState.STABLE
        else:
            self._check_epoch(member, epoch, request.owned)
        member.last_heartbeat = now
        if changed or self._metadata_changed(metadata):
            self.group_epoch += 1
        if self.assignment_epoch < self.group_epoch:
            self._compute_target(metadata)
        before = (member.member_epoch, _pairs(member.assigned))
        self._reconcile(member, request.owned, now)
        full = epoch == JOIN_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        answer = HeartbeatResponse(member.member_id, member.member_epoch)
        if full or before != (member.member_epoch, _pairs(member.assigned)):
            answer.assignment = _copy(member.assigned)
        return answer

    def _leave(self, request: HeartbeatRequest, now: float) -> HeartbeatResponse:
        member = self.members.get(request.member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {self.group_id}.",
            )
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.member_epoch = STATIC_LEAVE_EPOCH  # keeps its partitions for a while
            member.last_heartbeat = now
        else:
            self.remove(member.member_id)
        return HeartbeatResponse(request.member_id, request.member_epoch)

    def _member_for(self, request: HeartbeatRequest, now: float) -> ConsumerMember:
        member_id = request.member_id
        member = self.members.get(member_id)
        if request.member_epoch != JOIN_EPOCH:
            if member is None:
                raise KafkaError(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {self.group_id}.",
                )
            return member
        if member is not None:
            return member
        if request.instance_id is not None:
            previous = self.member_by_instance(request.instance_id)
            if previous is not None:
                if previous.member_epoch != STATIC_LEAVE_EPOCH:
                    raise KafkaError(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {previous.member_id} with instance id "
                        f"{request.instance_id} is not released yet.",
                    )
                return self._replace_static(previous, member_id, request)
        member = ConsumerMember(
            member_id, request.instance_id, request.client_id, request.client_host
        )
        member.last_heartbeat = now
        self.members[member_id] = member
        return member

    def _replace_static(
        self, previous: ConsumerMember, member_id: str, request: HeartbeatRequest
    ) -> ConsumerMember:
        """The same instance is back: it takes over the departed member's partitions."""
        del self.members[previous.member_id]
        target = self.target.pop(previous.member_id, {})
        previous.member_id = member_id
        previous.client_id, previous.client_host = request.client_id, request.client_host
        self.members[member_id] = previous
        self.target[member_id] = target
        return previous

    def _update_subscription(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        changed = False
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None
            if regex is not None:
                try:
                    re.compile(regex)
                except re.error as error:
                    raise KafkaError(
                        ErrorCode.invalid_regular_expression, f"Invalid regular expression: {error}"
                    ) from None
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            if request.server_assignor not in self.assignors:
                raise KafkaError(
                    ErrorCode.unsupported_assignor,
                    f"ServerAssignor {request.server_assignor} is not supported. Supported "
                    f"assignors: {', '.join(self.assignors)}.",
                )
            changed |= request.server_assignor != member.server_assignor
            member.server_assignor = request.server_assignor
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        return changed

    def _check_epoch(
        self, member: ConsumerMember, epoch: int, owned: MemberAssignment | None
    ) -> None:
        current = member.member_epoch
        if epoch > current:
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({current}). The member must abandon all its "
                "partitions and rejoin.",
            )
        if epoch < current and (
            epoch != member.previous_member_epoch
            or owned is None
            or not _pairs(owned) <= _pairs(member.assigned)
        ):
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({current}). The member must abandon all its "
                "partitions and rejoin.",
            )

    # -- assignment -----------------------------------------------------------------------

    def _metadata_changed(self, metadata: TopicMetadata) -> bool:
        subscribed = frozenset(
            (name, metadata.ids[name], metadata.partitions[metadata.ids[name]])
            for name in self.subscribed_topic_names(metadata)
        )
        if subscribed == self._subscribed_metadata:
            return False
        self._subscribed_metadata = subscribed
        return True

    def _compute_target(self, metadata: TopicMetadata) -> None:
        preferred = [m.server_assignor for m in self.members.values() if m.server_assignor]
        self.assignor_name = (
            max(set(preferred), key=preferred.count) if preferred else self.assignors[0]
        )
        subscriptions = {
            member_id: MemberSubscription(
                frozenset(
                    metadata.ids[name] for name in metadata.ids if member.subscribes_to(name)
                ),
                self.target.get(member_id, {}),
            )
            for member_id, member in self.members.items()
        }
        topics = {
            topic: metadata.partitions[topic]
            for subscription in subscriptions.values()
            for topic in subscription.topics
        }
        self.target = ASSIGNORS[self.assignor_name](subscriptions, topics)
        self.assignment_epoch = self.group_epoch
        self._subscribed_metadata = frozenset(
            (name, metadata.ids[name], metadata.partitions[metadata.ids[name]])
            for name in self.subscribed_topic_names(metadata)
        )

    def _owned_by_others(self, member_id: str) -> set[tuple[TopicId, int]]:
        owned: set[tuple[TopicId, int]] = set()
        for other in self.members.values():
            if other.member_id != member_id:
                owned |= _pairs(other.assigned) | _pairs(other.pending_revocation)
        return owned

    def _reconcile(
        self, member: ConsumerMember, owned: MemberAssignment | None, now: float
    ) -> None:
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            still_owned = _pairs(owned) if owned is not None else _pairs(member.pending_revocation)
            if still_owned & _pairs(member.pending_revocation):
                return  # waiting for the member to give them up
            member.pending_revocation = {}
            member.revocation_deadline = None
        elif member.member_epoch == self.assignment_epoch and member.state == MemberState.STABLE:
            return
        target = _pairs(self.target.get(member.member_id, {}))
        assigned = _pairs(member.assigned)
        revoke = assigned - target
        if revoke:
            member.assigned = _from_pairs(assigned & target)
            member.pending_revocation = _from_pairs(revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
            return
        wanted = target - assigned
        free = wanted - self._owned_by_others(member.member_id)
        member.assigned = _from_pairs(assigned | free)
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if free != wanted else MemberState.STABLE

    # -- removal --------------------------------------------------------------------------

    def remove(self, member_id: str) -> None:
        if self.members.pop(member_id, None) is not None:
            self.target.pop(member_id, None)
            self.group_epoch += 1

    def expire(self, now: float, session_timeout_ms: int) -> list[str]:
        """Remove members silent for the session timeout or late to revoke; their ids."""
        gone = [
            member.member_id
            for member in self.members.values()
            if now - member.last_heartbeat > session_timeout_ms / 1000
            or (member.revocation_deadline is not None and now > member.revocation_deadline)
        ]
        for member_id in gone:
            self.remove(member_id)
        return gone

    # -- offset commits -------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str | None, member_epoch: int, transactional: bool, api_version: int
    ) -> ErrorCode | None:
        """Kafka's rules for committing (or fetching) offsets of a consumer group."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch < 0 and not member_id:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if not transactional and api_version < 9:
            return ErrorCode.unsupported_version
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None
