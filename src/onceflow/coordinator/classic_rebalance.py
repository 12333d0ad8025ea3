"""The classic group protocol's rebalance: the state a group moves through as members
join, sync, fail and leave, and the timers that bound each step, as Apache Kafka's
``GroupCoordinator`` runs them.

* A group moves Empty → PreparingRebalance → CompletingRebalance → Stable, back to
  PreparingRebalance on any membership change, and to Dead when deleted.
* The rebalance completes when every known member has rejoined or the rebalance timeout
  (the largest of the members') expires, which removes the dynamic members that did not
  rejoin; ``group.initial.rebalance.delay.ms`` holds back the first rebalance of an empty
  group while members keep arriving (Kafka's InitialDelayedJoin).
* Members that have not sent SyncGroup within the rebalance timeout are removed.
* A member whose heartbeats stop for its session timeout is removed (members waiting in a
  JoinGroup or SyncGroup are bounded by the rebalance timeout instead), and so is one
  whose connection closes under ``onceflow.group.leave.on.disconnect``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from onceflow.clock import Clock
from onceflow.config import BrokerConfig
from onceflow.coordinator.group_log import GroupLog
from onceflow.coordinator.group_metadata import (
    Group,
    GroupState,
    GroupTable,
    JoinResult,
    Member,
    SyncResult,
)
from onceflow.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ClassicRebalance:
    groups: GroupTable
    group_log: GroupLog  # where a group's new generation is stored
    config: BrokerConfig
    clock: Clock

    @property
    def max_session_timeout_ms(self) -> int:
        return self.config["group.max.session.timeout.ms"]

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self.config["group.initial.rebalance.delay.ms"]

    def tick(self, now: float) -> None:
        """Expire sessions, pending members, join and sync deadlines."""
        for group in list(self.groups.values()):
            expired = [m for m, deadline in group.pending_members.items() if deadline <= now]
            for member_id in expired:
                del group.pending_members[member_id]
                log.info("pending member %s of group %s expired", member_id, group.group_id)
            if expired:
                self.try_complete_join(group, now)
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member:
                    continue  # removed meanwhile (a completed rebalance drops stragglers)
                if member.awaiting_join or member.awaiting_sync:
                    continue
                if now - member.last_heartbeat > member.session_timeout_ms / 1000:
                    self.remove_member(
                        group,
                        member,
                        f"member {member.member_id} in group {group.group_id} has failed, "
                        "removing it from the group (session timeout)",
                        now,
                    )
            if (
                group.is_(GroupState.PREPARING_REBALANCE)
                and group.join_deadline is not None
                and now >= group.join_deadline
            ):
                self._on_join_deadline(group, now)
            if group.sync_deadline is not None and now >= group.sync_deadline:
                self._on_sync_deadline(group, now)

    def member_disconnected(self, group: Group, member_id: str, now: float) -> None:
        """The member's connection closed: its session ends now, as if it had expired."""
        if group.pending_members.pop(member_id, None) is not None:
            self.try_complete_join(group, now)
            return
        member = group.members.get(member_id)
        if member is not None:
            self.remove_member(
                group,
                member,
                f"member {member_id} in group {group.group_id} disconnected, removing it "
                "from the group (onceflow.group.leave.on.disconnect)",
                now,
            )

    def _on_join_deadline(self, group: Group, now: float) -> None:
        if group.initial_join_limit is not None:  # Kafka's InitialDelayedJoin
            if group.new_member_added and now < group.initial_join_limit:
                group.new_member_added = False
                delay = self.initial_rebalance_delay_ms / 1000
                group.join_deadline = min(now + delay, group.initial_join_limit)
                return
            group.initial_join_limit = None
        self._complete_join(group, now)

    def _on_sync_deadline(self, group: Group, now: float) -> None:
        group.sync_deadline = None
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                member.answer_join(JoinResult(ErrorCode.unknown_member_id, member_id))
        self.prepare(group, f"removing {missing} on pending sync request expiration", now)
        self.try_complete_join(group, now)

    def maybe_prepare(self, group: Group, reason: str, now: float) -> None:
        if group.can_rebalance():
            self.prepare(group, reason, now)
        self.try_complete_join(group, now)

    def prepare(self, group: Group, reason: str, now: float) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_assignments(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        group.sync_deadline = None
        was_empty = group.is_(GroupState.EMPTY)
        old_generation = group.generation_id
        old_state = group.state
        group.transition(GroupState.PREPARING_REBALANCE, self.clock.now_ms())
        timeout = group.max_rebalance_timeout_ms(self.max_session_timeout_ms) / 1000
        delay = self.initial_rebalance_delay_ms / 1000
        if was_empty and delay > 0:
            group.new_member_added = False
            group.join_deadline = now + min(delay, timeout)
            group.initial_join_limit = now + timeout
        else:
            group.initial_join_limit = None
            group.join_deadline = now + timeout
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
            group.group_id,
            old_state.value,
            old_generation,
            reason,
        )

    def try_complete_join(self, group: Group, now: float) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.initial_join_limit is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group, now)

    def _complete_join(self, group: Group, now: float) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove(member.member_id)
                log.info(
                    "member %s of group %s did not rejoin in time; removed",
                    member.member_id,
                    group.group_id,
                )
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined remain: wait for them (or for
            # their session timeout) one more rebalance timeout.
            timeout = group.max_rebalance_timeout_ms(self.max_session_timeout_ms) / 1000
            group.join_deadline = now + timeout
            return
        group.join_deadline = None
        group.initial_join_limit = None
        group.init_next_generation(self.clock.now_ms())
        if group.is_(GroupState.EMPTY):
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            self.group_log.store_group_soon(group)
            return
        log.info(
            "stabilized group %s generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
        )
        for member in group.members.values():
            member.answer_join(self.current_generation(group, member))
            member.last_heartbeat = now
            member.is_new = False
            group.pending_sync.add(member.member_id)
        timeout = group.max_rebalance_timeout_ms(self.max_session_timeout_ms) / 1000
        group.sync_deadline = now + timeout

    def reset_assignments(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.answer_sync(SyncResult(error))

    def remove_member(self, group: Group, member: Member, reason: str, now: float) -> None:
        member.answer_join(JoinResult(ErrorCode.unknown_member_id, ""))
        member.answer_sync(SyncResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        log.info("%s", reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare(group, reason, now)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group, now)

    def current_generation(self, group: Group, member: Member) -> JoinResult:
        everyone = []
        if group.is_leader(member.member_id):
            everyone = [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            everyone,
        )
