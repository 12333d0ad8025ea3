"""The classic group protocol's requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
as Apache Kafka's ``GroupCoordinator`` answers them (the pre-KIP-848 protocol). The
rebalance they drive, with its timers, is ``classic_rebalance``.

* JoinGroup v4+ without a member id answers MEMBER_ID_REQUIRED with a fresh id (KIP-394).
  The first member is the leader and receives every member's metadata for the selected
  protocol (each member votes for its most preferred protocol that all support).
* SyncGroup from the leader carries the assignment; it is made durable in
  ``__consumer_offsets`` before members receive it.
* Static members (``group.instance.id``) keep their place across restarts; a newer
  instance with the same id fences the older one (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from onceflow.clock import Clock
from onceflow.config import BrokerConfig
from onceflow.coordinator.classic_rebalance import ClassicRebalance
from onceflow.coordinator.consumer_protocol import not_classic
from onceflow.coordinator.group_log import GroupLog
from onceflow.coordinator.group_metadata import (
    Group,
    GroupState,
    GroupTable,
    JoinResult,
    Member,
    SyncResult,
)
from onceflow.coordinator.group_requests import JoinGroupRequest, SyncGroupRequest
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class ClassicProtocol:
    def __init__(
        self, groups: GroupTable, group_log: GroupLog, config: BrokerConfig, clock: Clock
    ) -> None:
        self.groups = groups
        self.group_log = group_log
        self.config = config
        self.clock = clock
        self.rebalance = ClassicRebalance(groups, group_log, config, clock)

    # -- configuration --------------------------------------------------------------------

    @property
    def min_session_timeout_ms(self) -> int:
        return self.config["group.min.session.timeout.ms"]

    def tick(self, now: float) -> None:
        """Expire sessions, pending members, join and sync deadlines."""
        self.rebalance.tick(now)

    def member_disconnected(self, group: Group, member_id: str, now: float) -> None:
        """The member's connection closed: its session ends now, as if it had expired."""
        self.rebalance.member_disconnected(group, member_id, now)

    # -- JoinGroup ------------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest) -> JoinResult:
        member_id = request.member_id
        if not request.group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        timeout = request.session_timeout_ms
        if not (self.min_session_timeout_ms <= timeout <= self.rebalance.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        now = self.clock.monotonic()
        group = self.groups.get(request.group_id)
        if not_classic(group):
            return JoinResult(ErrorCode.group_id_not_found, member_id)
        if group is not None:
            group.consumer = None  # an empty consumer group becomes a classic one
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = self.groups.detached(request.group_id)
            if not group.supports_protocols(request.protocol_type, request.protocol_names):
                return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
            self.groups[request.group_id] = group
        if not member_id:
            outcome = await self._join_unknown_member(group, request, now)
        else:
            outcome = self._join_known_member(group, request, now)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    async def _join_unknown_member(
        self, group: Group, request: JoinGroupRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, "")
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            return JoinResult(ErrorCode.inconsistent_group_protocol, "")
        instance_id = request.group_instance_id
        new_id = f"{instance_id or request.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return await self._update_static_member_and_rebalance(
                    group, old_id, new_id, request, now
                )
        elif request.require_known_member_id:
            group.pending_members[new_id] = now + request.session_timeout_ms / 1000
            return JoinResult(ErrorCode.member_id_required, new_id)
        return self._add_member_and_rebalance(group, new_id, request, now)

    def _join_known_member(
        self, group: Group, request: JoinGroupRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = request.member_id
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, request, now)
        if group.is_static_member_fenced(request.group_instance_id, member_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.is_(GroupState.COMPLETING_REBALANCE) and member.matches(request.protocols):
            # The member did not see the JoinGroup response: send it again.
            return self.rebalance.current_generation(group, member)
        if (
            group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
            or group.is_leader(member_id)
            or not member.matches(request.protocols)
        ):
            return self._update_member_and_rebalance(group, member, request, now)
        # Stable or Empty, a follower with unchanged metadata
        member.last_heartbeat = now
        return self.rebalance.current_generation(group, member)

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, request: JoinGroupRequest, now: float
    ) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
            last_heartbeat=now,
            is_new=True,
        )
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            group.new_member_added = True
        group.add(member)
        self.rebalance.maybe_prepare(
            group,
            f"adding new member {member_id} with group instance id "
            f"{request.group_instance_id}; client reason: {request.why}",
            now,
        )
        return future

    @staticmethod
    def _update_member(member: Member, request: JoinGroupRequest, now: float) -> None:
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.last_heartbeat = now

    def _update_member_and_rebalance(
        self, group: Group, member: Member, request: JoinGroupRequest, now: float
    ) -> asyncio.Future[JoinResult]:
        self._update_member(member, request, now)
        # A member re-sending JoinGroup replaces its earlier, unanswered request.
        member.answer_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        self.rebalance.maybe_prepare(
            group,
            f"updating metadata for member {member.member_id}; client reason: {request.why}",
            now,
        )
        return future

    async def _update_static_member_and_rebalance(
        self, group: Group, old_id: str, new_id: str, request: JoinGroupRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        instance_id = request.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._update_member(member, request, now)
        log.info("static member %s of group %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            generation = group.generation_id
            await self.group_log.store_group(group)
            # The old leader id is returned on purpose: the restarted member must not
            # compute an assignment a Stable group would never broadcast (as in Kafka).
            return JoinResult(
                ErrorCode.none,
                new_id,
                generation,
                group.protocol_type,
                group.protocol_name,
                current_leader,
                [],
            )
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        reason = f"static member {instance_id} rejoined with a new member id"
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.rebalance.prepare(group, reason, now)
            self.rebalance.try_complete_join(group, now)
        else:
            self.rebalance.maybe_prepare(group, reason, now)
        return future

    # -- SyncGroup ------------------------------------------------------------------------

    def _member(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> tuple[Group, Member] | ErrorCode:
        """The checks SyncGroup and Heartbeat share, in Kafka's order."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if not_classic(group):
            return ErrorCode.group_id_not_found
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return group, member

    async def sync_group(self, request: SyncGroupRequest) -> SyncResult:
        found = self._member(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id
        )
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        group, member = found
        protocol_type, protocol_name = request.protocol_type, request.protocol_name
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            group.sync_deadline = None
        member.last_heartbeat = self.clock.monotonic()
        if group.is_(GroupState.STABLE):
            return SyncResult(
                ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
            )
        # CompletingRebalance: wait for the leader's assignment.
        member.answer_sync(SyncResult(ErrorCode.rebalance_in_progress))
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if group.is_leader(member.member_id):
            await self._store_assignment(group, member.member_id, request.assignments)
        result = await future
        member.last_heartbeat = self.clock.monotonic()
        return result

    async def _store_assignment(
        self, group: Group, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        """The leader's assignment: durable first, then every member receives its share."""
        everyone = {m: assignments.get(m, b"") for m in group.members}
        generation = group.generation_id
        try:
            await self.group_log.store_group(group, everyone)
        except KafkaError as error:
            stored, code = False, error.code
        else:
            stored, code = True, ErrorCode.none
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return  # the group moved on meanwhile
        if not stored:
            self.rebalance.reset_assignments(group, code)
            self.rebalance.maybe_prepare(
                group, "failed to store the assignment", self.clock.monotonic()
            )
            return
        for other in group.members.values():
            other.assignment = everyone.get(other.member_id, b"")
            other.answer_sync(
                SyncResult(
                    ErrorCode.none, other.assignment, group.protocol_type, group.protocol_name
                )
            )
        group.transition(GroupState.STABLE, self.clock.now_ms())
        log.info(
            "assignment received from leader %s for group %s generation %d",
            leader_id,
            group.group_id,
            generation,
        )

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        found = self._member(group_id, member_id, group_instance_id, generation_id)
        if isinstance(found, ErrorCode):
            return found
        group, member = found
        if group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        member.last_heartbeat = self.clock.monotonic()
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove members given as (member id, group instance id); per-member errors."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self.groups.get(group_id)
        if not_classic(group):
            return ErrorCode.group_id_not_found, []
        if group is None:
            return ErrorCode.none, [(m, i, ErrorCode.unknown_member_id) for m, i in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        now = self.clock.monotonic()
        results = []
        for member_id, instance_id in leaving:
            code = self._leave_one(group, member_id, instance_id, now)
            results.append((member_id, instance_id, code))
        return ErrorCode.none, results

    def _leave_one(
        self, group: Group, member_id: str, instance_id: str | None, now: float
    ) -> ErrorCode:
        if not member_id and instance_id is not None:
            registered = group.static_member_id(instance_id)
            if registered is None:
                return ErrorCode.unknown_member_id
            member_id = registered
        elif group.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self.rebalance.try_complete_join(group, now)
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self.rebalance.remove_member(
            group,
            member,
            f"member {member_id} (instance {instance_id}) left group {group.group_id}",
            now,
        )
        return ErrorCode.none
