"""The group coordinator: Kafka's consumer groups and their committed offsets.

It is made of the parts Kafka's ``GroupCoordinator`` has, one module each:

* :mod:`classic_protocol`: the classic protocol's state machine (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup) with its session and rebalance timers;
* :mod:`consumer_protocol`: KIP-848 consumer groups (ConsumerGroupHeartbeat);
* :mod:`group_offsets`: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete;
* :mod:`group_log` and :mod:`group_replay`: ``__consumer_offsets``, where group metadata
  and offsets are stored in Kafka's binary formats and from which they are replayed at
  start.

This module starts and stops them, runs their timers, and answers the administrative
requests (ListGroups, DescribeGroups, DeleteGroups).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from onceflow.clock import SYSTEM_CLOCK, Clock
from onceflow.config import BrokerConfig
from onceflow.coordinator.classic_protocol import ClassicProtocol
from onceflow.coordinator.consumer_protocol import ConsumerProtocol, not_classic
from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC, GroupLog
from onceflow.coordinator.group_metadata import (
    Group,
    GroupState,
    GroupTable,
    JoinResult,
    SyncResult,
)
from onceflow.coordinator.group_offsets import OffsetStore
from onceflow.coordinator.group_records import group_key, offset_key
from onceflow.coordinator.group_replay import GroupReplay
from onceflow.log.batch import KeyValue
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TICK_SECONDS = 0.05
GROUP_TYPE_CLASSIC = "classic"


class GroupCoordinator:
    def __init__(self, logs: LogManager, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.groups = GroupTable(clock.now_ms)
        self.log = GroupLog(logs, config["offsets.topic.num.partitions"], clock)
        self.offsets = OffsetStore(self.groups, self.log, logs, clock)
        self.classic = ClassicProtocol(self.groups, self.log, config, clock)
        self.consumer_protocol = ConsumerProtocol(self.groups, logs, config, clock)
        self._task: asyncio.Task[None] | None = None

    def offsets_partition_for(self, group_id: str) -> int:
        return self.log.partition_for(group_id)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        started = self.clock.monotonic()
        replay = GroupReplay(self.groups, self.offsets)
        for partition in self.log.open():
            if partition.offline:
                log.error(
                    "%s is offline: its groups are unavailable (%s)",
                    partition.name,
                    partition.offline,
                )
                continue
            replay.partition(partition)
        now = self.clock.monotonic()
        for group in self.groups.values():
            for member in group.members.values():
                member.last_heartbeat = now
        if self.groups:
            log.info(
                "loaded %d groups from %s in %.2fs",
                len(self.groups),
                CONSUMER_OFFSETS_TOPIC,
                now - started,
            )
        self._task = asyncio.create_task(self._timer_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for group in self.groups.values():
            for member in group.members.values():
                member.answer_join(JoinResult(ErrorCode.not_coordinator, member.member_id))
                member.answer_sync(SyncResult(ErrorCode.not_coordinator))

    async def _timer_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.tick(self.clock.monotonic())
            except Exception:
                log.exception("group coordinator timer failed")

    def tick(self, now: float) -> None:
        """Expire sessions, pending members, join and sync deadlines."""
        self.consumer_protocol.tick(now)
        self.classic.tick(now)

    def members_disconnected(self, members: dict[str, str]) -> None:
        """End the sessions of ``members`` (group id -> member id) now: their connection
        closed (onceflow.group.leave.on.disconnect)."""
        now = self.clock.monotonic()
        for group_id, member_id in members.items():
            group = self.groups.get(group_id)
            if group is None:
                continue
            if group.consumer is not None:
                self.consumer_protocol.member_disconnected(group.consumer, member_id)
            else:
                self.classic.member_disconnected(group, member_id, now)

    # -- administration -------------------------------------------------------------------

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[Group]:
        wanted_states = {s.lower() for s in states or ()}
        wanted_types = {t.lower() for t in types or ()}
        return [
            group
            for group in sorted(self.groups.values(), key=lambda g: g.group_id)
            if not group.is_(GroupState.DEAD)
            and (not wanted_states or group_state(group).lower() in wanted_states)
            and (not wanted_types or group_type(group) in wanted_types)
        ]

    def describe_group(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return None
        if not_classic(group):
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a classic group."
            )
        return group

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        waits = []
        for group_id in group_ids:
            if group_id is None:
                results[group_id] = ErrorCode.invalid_group_id
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
                continue
            if not group.is_(GroupState.EMPTY) or not_classic(group):
                results[group_id] = ErrorCode.non_empty_group
                continue
            records = [KeyValue(offset_key(group_id, t, p), None) for t, p in group.offsets]
            records.append(KeyValue(group_key(group_id), None))
            try:
                appended = self.log.append(group_id, records)
            except KafkaError as error:
                results[group_id] = error.code
                continue
            # Dead until the tombstones are durable: joins and commits meanwhile get the
            # retriable COORDINATOR_NOT_AVAILABLE, and a refused write leaves it as it was.
            group.transition(GroupState.DEAD, self.clock.now_ms())
            waits.append((group, appended.durable()))
        outcomes = await asyncio.gather(*(wait for _, wait in waits), return_exceptions=True)
        for (group, _), outcome in zip(waits, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                group.state = GroupState.EMPTY
                code = outcome.code if isinstance(outcome, KafkaError) else None
                results[group.group_id] = code or ErrorCode.not_coordinator
                log.warning("group %s not deleted: %s", group.group_id, outcome)
                continue
            group.offsets.clear()
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            results[group.group_id] = ErrorCode.none
            log.info("deleted group %s", group.group_id)
        return results


def group_type(group: Group) -> str:
    return "consumer" if group.consumer is not None else GROUP_TYPE_CLASSIC


def group_state(group: Group) -> str:
    """Kafka's state name: a consumer group's (Empty, Assigning, ...) or a classic one's."""
    return group.consumer.state if group.consumer is not None else group.state.value
