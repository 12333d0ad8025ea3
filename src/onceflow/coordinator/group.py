"""The group coordinator: Kafka's classic consumer group protocol and committed offsets.

It follows Apache Kafka's ``GroupCoordinator`` (the pre-KIP-848 protocol):

* A group moves Empty → PreparingRebalance → CompletingRebalance → Stable, back to
  PreparingRebalance on any membership change, and to Dead when deleted.
* JoinGroup v4+ without a member id answers MEMBER_ID_REQUIRED with a fresh id (KIP-394);
  the rebalance completes when every known member has rejoined or the rebalance timeout
  (the largest of the members') expires, which removes the dynamic members that did not
  rejoin. The first member is the leader and receives every member's metadata for the
  selected protocol (each member votes for its most preferred protocol that all support).
* SyncGroup from the leader carries the assignment; it is made durable in
  ``__consumer_offsets`` before members receive it. Members that have not sent SyncGroup
  within the rebalance timeout are removed.
* A member whose heartbeats stop for its session timeout is removed (members waiting in a
  JoinGroup or SyncGroup are bounded by the rebalance timeout instead).
* Static members (``group.instance.id``) keep their place across restarts; a newer
  instance with the same id fences the older one (FENCED_INSTANCE_ID).

Committed offsets and group metadata are records in the compacted internal topic
``__consumer_offsets`` (Kafka's binary formats, see :mod:`group_records`), replayed at
start. OffsetCommit is answered only once its record is durable. Transactional offset
commits (TxnOffsetCommit) are transactional batches that stay pending until the
transaction coordinator writes the COMMIT or ABORT marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING

from onceflow.clock import now_ms
from onceflow.coordinator.consumer_protocol import ConsumerProtocol, not_classic
from onceflow.coordinator.errors import as_coordinator_error
from onceflow.coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    TopicPartition,
)
from onceflow.coordinator.group_records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
)
from onceflow.log.batch import CONTROL_COMMIT, KeyValue, control_type_of, read_key_values
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from onceflow.broker.broker import Broker

log = logging.getLogger(__name__)

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
TICK_SECONDS = 0.05
GROUP_TYPE_CLASSIC = "classic"

# (offset, leader epoch, metadata) per topic-partition, as requests carry them
OffsetRequest = dict[TopicPartition, tuple[int, int, str | None]]


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for index in range(0, len(data), 2):
        h = (31 * h + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: Integer.MIN_VALUE maps to 0."""
    return 0 if value == -(2**31) else abs(value)


class GroupCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.groups: dict[str, Group] = {}
        self.num_partitions = max(1, broker.config["offsets.topic.num.partitions"])
        self._txn_groups: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self._task: asyncio.Task[None] | None = None
        self.consumer_protocol = ConsumerProtocol(self)

    # -- configuration --------------------------------------------------------------------

    @property
    def min_session_timeout_ms(self) -> int:
        return self.broker.config["group.min.session.timeout.ms"]

    @property
    def max_session_timeout_ms(self) -> int:
        return self.broker.config["group.max.session.timeout.ms"]

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self.broker.config["group.initial.rebalance.delay.ms"]

    def offsets_partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of a group (Kafka's abs(hashCode) mod N)."""
        return kafka_abs(java_string_hash(group_id)) % self.num_partitions

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        logs = self.broker.logs
        topic = logs.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None:
            topic = logs.create_topic(
                CONSUMER_OFFSETS_TOPIC,
                self.num_partitions,
                1,
                {"cleanup.policy": "compact", "segment.bytes": 104_857_600},
                internal=True,
            )
        self.num_partitions = len(topic.partitions)
        started = time.monotonic()
        for partition in topic.partitions:
            if partition.offline:
                log.error(
                    "%s is offline: its groups are unavailable (%s)",
                    partition.name,
                    partition.offline,
                )
                continue
            self._replay(partition)
        now = time.monotonic()
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

    # -- replay ---------------------------------------------------------------------------

    def _replay(self, partition: PartitionLog) -> None:
        number = partition.partition
        for header, data in partition.iter_batches():
            header.position = 0
            if header.is_control:
                committed = control_type_of(data, header) == CONTROL_COMMIT
                self.complete_transaction(header.producer_id, committed, number)
                continue
            try:
                records = read_key_values(data, header)
            except ValueError as error:
                log.warning("skipping %s-%d batch at %d: %s", *_where(partition, header), error)
                continue
            producer_id = header.producer_id if header.is_transactional else -1
            for delta, record in enumerate(records):
                try:
                    self._replay_record(record, header.base_offset + delta, producer_id)
                except (RecordFormatError, UnicodeDecodeError) as error:
                    log.warning(
                        "skipping %s record at offset %d: %s",
                        CONSUMER_OFFSETS_TOPIC,
                        header.base_offset + delta,
                        error,
                    )

    def _replay_record(self, record: KeyValue, offset: int, producer_id: int) -> None:
        if record.key is None:
            return
        key = parse_key(record.key)
        if isinstance(key, OffsetKey):
            topic_partition = (key.topic, key.partition)
            if record.value is None:
                group = self.groups.get(key.group_id)
                if group is not None:
                    group.offsets.pop(topic_partition, None)
                    if group.is_removable():
                        del self.groups[key.group_id]
                return
            value = parse_offset_value(record.value)
            committed = CommittedOffset(
                value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, offset
            )
            group = self._group_or_new(key.group_id)
            if producer_id >= 0:
                group.pending_txn_offsets.setdefault(producer_id, {})[topic_partition] = committed
                self._txn_groups.setdefault(producer_id, set()).add(key.group_id)
            else:
                group.apply_offset(topic_partition, committed)
        elif isinstance(key, GroupKey):
            if record.value is None:
                group = self.groups.pop(key.group_id, None)
                if group is not None and (group.offsets or group.pending_txn_offsets):
                    fresh = self._group_or_new(key.group_id)
                    fresh.offsets = group.offsets
                    fresh.pending_txn_offsets = group.pending_txn_offsets
                return
            self._load_group(key.group_id, parse_group_value(record.value))

    def _load_group(self, group_id: str, value: GroupValue) -> None:
        group = self._group_or_new(group_id)
        for member in group.members.values():
            member.answer_join(JoinResult(ErrorCode.not_coordinator, member.member_id))
        group.members.clear()
        group.static_members.clear()
        group.pending_sync.clear()
        group.generation_id = value.generation_id
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol_name
        group.state_timestamp = value.state_timestamp
        for record in value.members:
            group.add(
                Member(
                    record.member_id,
                    record.group_instance_id,
                    record.client_id,
                    record.client_host,
                    record.rebalance_timeout_ms,
                    record.session_timeout_ms,
                    value.protocol_type,
                    [(value.protocol_name or "", record.subscription)],
                    assignment=record.assignment,
                )
            )
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader_id if value.leader_id in group.members else None
        if group.leader_id is None and group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed = group.compute_subscribed_topics() if group.members else None

    def new_group(self, group_id: str) -> Group:
        return self._group_or_new(group_id)

    def _group_or_new(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
            group.state_timestamp = now_ms()
        return group

    # -- persistence ----------------------------------------------------------------------

    def _offsets_log(self, group_id: str) -> PartitionLog:
        try:
            partition = self.broker.logs.partition(
                CONSUMER_OFFSETS_TOPIC, self.offsets_partition_for(group_id)
            )
        except KafkaError:
            raise KafkaError(
                ErrorCode.coordinator_not_available, f"{CONSUMER_OFFSETS_TOPIC} is missing"
            ) from None
        if partition.offline:
            raise KafkaError(ErrorCode.coordinator_not_available, partition.offline)
        return partition

    def _append(
        self,
        group_id: str,
        records: list[KeyValue],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[PartitionLog, int]:
        """Append now; return the partition and the base offset (not yet durable)."""
        partition = self._offsets_log(group_id)
        try:
            base = partition.append_records(records, producer_id, producer_epoch)
        except KafkaError as error:
            raise as_coordinator_error(error) from None
        return partition, base

    @staticmethod
    async def _durable(partition: PartitionLog, end_offset: int) -> None:
        try:
            await partition.wait_durable(end_offset)
        except KafkaError as error:
            raise as_coordinator_error(error) from None

    async def _append_durably(self, group_id: str, records: list[KeyValue]) -> int:
        partition, base = self._append(group_id, records)
        await self._durable(partition, base + len(records))
        return base

    def _group_record(self, group: Group, assignments: dict[str, bytes] | None = None) -> KeyValue:
        members = [
            MemberRecord(
                member.member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                member.rebalance_timeout_ms,
                member.session_timeout_ms,
                member.metadata_for(group.protocol_name),
                (assignments or {}).get(member.member_id, member.assignment),
            )
            for member in group.members.values()
        ]
        value = GroupValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            now_ms(),
            members,
        )
        return KeyValue(group_key(group.group_id), group_value(value))

    def _store_group_soon(self, group: Group) -> None:
        """Persist the group metadata without waiting for the fsync."""
        try:
            self._append(group.group_id, [self._group_record(group)])
        except KafkaError as error:
            log.warning("cannot store metadata of group %s: %s", group.group_id, error)

    # -- timers ---------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.tick(time.monotonic())
            except Exception:
                log.exception("group coordinator timer failed")

    def tick(self, now: float) -> None:
        """Expire sessions, pending members, join and sync deadlines."""
        self.consumer_protocol.tick(now)
        for group in list(self.groups.values()):
            expired = [m for m, deadline in group.pending_members.items() if deadline <= now]
            for member_id in expired:
                del group.pending_members[member_id]
                log.info("pending member %s of group %s expired", member_id, group.group_id)
            if expired:
                self._try_complete_join(group, now)
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member:
                    continue  # removed meanwhile (a completed rebalance drops stragglers)
                if member.awaiting_join or member.awaiting_sync:
                    continue
                if now - member.last_heartbeat > member.session_timeout_ms / 1000:
                    self._remove_member_and_update_group(
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
        self._prepare_rebalance(
            group, f"removing {missing} on pending sync request expiration", now
        )
        self._try_complete_join(group, now)

    # -- rebalancing ----------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str, now: float) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason, now)
        self._try_complete_join(group, now)

    def _prepare_rebalance(self, group: Group, reason: str, now: float) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        group.sync_deadline = None
        was_empty = group.is_(GroupState.EMPTY)
        old_generation = group.generation_id
        old_state = group.state
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
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

    def _try_complete_join(self, group: Group, now: float) -> None:
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
        group.init_next_generation(now_ms())
        if group.is_(GroupState.EMPTY):
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            self._store_group_soon(group)
            return
        log.info(
            "stabilized group %s generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
        )
        everyone = [
            (member.member_id, member.group_instance_id, member.metadata_for(group.protocol_name))
            for member in group.members.values()
        ]
        for member in group.members.values():
            member.answer_join(
                JoinResult(
                    ErrorCode.none,
                    member.member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    everyone if group.is_leader(member.member_id) else [],
                )
            )
            member.last_heartbeat = now
            member.is_new = False
            group.pending_sync.add(member.member_id)
        timeout = group.max_rebalance_timeout_ms(self.max_session_timeout_ms) / 1000
        group.sync_deadline = now + timeout

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.answer_sync(SyncResult(error))

    def _remove_member_and_update_group(
        self, group: Group, member: Member, reason: str, now: float
    ) -> None:
        member.answer_join(JoinResult(ErrorCode.unknown_member_id, ""))
        member.answer_sync(SyncResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        log.info("%s", reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason, now)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now)

    # -- JoinGroup ------------------------------------------------------------------------

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        reason: str | None = None,
    ) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        if not (self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        now = time.monotonic()
        group = self.groups.get(group_id)
        if not_classic(group):
            return JoinResult(ErrorCode.group_id_not_found, member_id)
        if group is not None:
            group.consumer = None  # an empty consumer group becomes a classic one
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = Group(group_id)
            group.state_timestamp = now_ms()
            if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
                return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
            self.groups[group_id] = group
        why = reason or "joining"
        args = (
            group,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )
        if not member_id:
            outcome = await self._join_unknown_member(*args, require_known_member_id, why, now)
        else:
            outcome = self._join_known_member(member_id, *args, why, now)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    async def _join_unknown_member(
        self,
        group: Group,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        reason: str,
        now: float,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, "")
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, "")
        new_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_id = group.static_member_id(group_instance_id)
            if old_id is not None:
                return await self._update_static_member_and_rebalance(
                    group,
                    old_id,
                    new_id,
                    group_instance_id,
                    protocols,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    now,
                )
        elif require_known_member_id:
            group.pending_members[new_id] = now + session_timeout_ms / 1000
            return JoinResult(ErrorCode.member_id_required, new_id)
        return self._add_member_and_rebalance(
            group,
            new_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            reason,
            now,
        )

    def _join_known_member(
        self,
        member_id: str,
        group: Group,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        reason: str,
        now: float,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
                reason,
                now,
            )
        if group.is_static_member_fenced(group_instance_id, member_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(
                group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reason, now
            )
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member did not see the JoinGroup response: send it again.
                return self._current_generation(group, member)
            return self._update_member_and_rebalance(
                group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reason, now
            )
        # Stable or Empty
        if group.is_leader(member_id) or not member.matches(protocols):
            return self._update_member_and_rebalance(
                group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reason, now
            )
        member.last_heartbeat = now
        return self._current_generation(group, member)

    def _current_generation(self, group: Group, member: Member) -> JoinResult:
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

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        reason: str,
        now: float,
    ) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            list(protocols),
            last_heartbeat=now,
            is_new=True,
        )
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id "
            f"{group_instance_id}; client reason: {reason}",
            now,
        )
        return future

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        reason: str,
        now: float,
    ) -> asyncio.Future[JoinResult]:
        member.protocols = list(protocols)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_heartbeat = now
        # A member re-sending JoinGroup replaces its earlier, unanswered request.
        member.answer_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        self._maybe_prepare_rebalance(
            group, f"updating metadata for member {member.member_id}; client reason: {reason}", now
        )
        return future

    async def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        group_instance_id: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: float,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_id, new_id)
        member.protocols = list(protocols)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_heartbeat = now
        log.info(
            "static member %s of group %s rejoined as %s", group_instance_id, group.group_id, new_id
        )
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            generation = group.generation_id
            await self._append_durably(group.group_id, [self._group_record(group)])
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
        reason = f"static member {group_instance_id} rejoined with a new member id"
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason, now)
            self._try_complete_join(group, now)
        else:
            self._maybe_prepare_rebalance(group, reason, now)
        return future

    # -- SyncGroup ------------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        if not group_id:
            return SyncResult(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if not_classic(group):
            return SyncResult(ErrorCode.group_id_not_found)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.coordinator_not_available)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        now = time.monotonic()
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None
        member.last_heartbeat = now
        if group.is_(GroupState.STABLE):
            return SyncResult(
                ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
            )
        # CompletingRebalance: wait for the leader's assignment.
        member.answer_sync(SyncResult(ErrorCode.rebalance_in_progress))
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if group.is_leader(member_id):
            everyone = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            try:
                await self._append_durably(group.group_id, [self._group_record(group, everyone)])
            except KafkaError as error:
                if group.is_(GroupState.COMPLETING_REBALANCE) and (
                    group.generation_id == generation
                ):
                    self._reset_and_propagate_assignment_error(group, error.code)
                    self._maybe_prepare_rebalance(
                        group, "failed to store the assignment", time.monotonic()
                    )
            else:
                if group.is_(GroupState.COMPLETING_REBALANCE) and (
                    group.generation_id == generation
                ):
                    for other in group.members.values():
                        other.assignment = everyone.get(other.member_id, b"")
                        other.answer_sync(
                            SyncResult(
                                ErrorCode.none,
                                other.assignment,
                                group.protocol_type,
                                group.protocol_name,
                            )
                        )
                    group.transition(GroupState.STABLE, now_ms())
                    log.info(
                        "assignment received from leader %s for group %s generation %d",
                        member_id,
                        group.group_id,
                        generation,
                    )
        result = await future
        member.last_heartbeat = time.monotonic()
        return result

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if not_classic(group):
            return ErrorCode.group_id_not_found
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        member.last_heartbeat = time.monotonic()
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
        now = time.monotonic()
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
            self._try_complete_join(group, now)
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_member_and_update_group(
            group,
            member,
            f"member {member_id} (instance {instance_id}) left group {group.group_id}",
            now,
        )
        return ErrorCode.none

    # -- offsets --------------------------------------------------------------------------

    def _partition_exists(self, topic_partition: TopicPartition) -> bool:
        topic = self.broker.logs.topics.get(topic_partition[0])
        return topic is not None and 0 <= topic_partition[1] < len(topic.partitions)

    def _check_offsets(
        self, offsets: OffsetRequest, results: dict[TopicPartition, ErrorCode]
    ) -> OffsetRequest:
        """Per-partition checks; what passes is returned, failures go to ``results``."""
        valid = {}
        for topic_partition, (offset, epoch, metadata) in offsets.items():
            if not self._partition_exists(topic_partition):
                results[topic_partition] = ErrorCode.unknown_topic_or_partition
            elif metadata is not None and len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[topic_partition] = ErrorCode.offset_metadata_too_large
            else:
                valid[topic_partition] = (offset, epoch, metadata)
        return valid

    def _offset_records(
        self, group_id: str, offsets: OffsetRequest, timestamp: int
    ) -> list[KeyValue]:
        return [
            KeyValue(
                offset_key(group_id, topic, partition),
                offset_value(OffsetValue(offset, epoch, metadata or "", timestamp)),
            )
            for (topic, partition), (offset, epoch, metadata) in offsets.items()
        ]

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: OffsetRequest,
        api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: answered once the commit record is durable."""
        if group_id is None:
            return dict.fromkeys(offsets, ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.illegal_generation)
            group = Group(group_id)  # a group that only stores offsets
            group.state_timestamp = now_ms()
        if group.consumer is not None:
            error = group.consumer.validate_offset_commit(
                member_id, generation_id, False, api_version
            )
        else:
            error = self._commit_error(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid = self._check_offsets(offsets, results)
        if not valid:
            return results
        self.groups.setdefault(group_id, group)
        timestamp = now_ms()
        records = self._offset_records(group_id, valid, timestamp)
        try:
            partition, base = self._append(group_id, records)
        except KafkaError as error:
            results.update(dict.fromkeys(valid, error.code))
            return results
        for topic_partition in valid:
            group.pending_offset_commits[topic_partition] += 1
        try:
            await self._durable(partition, base + len(records))
        except KafkaError as error:
            results.update(dict.fromkeys(valid, error.code))
            return results
        finally:
            for topic_partition in valid:
                group.pending_offset_commits[topic_partition] -= 1
                if group.pending_offset_commits[topic_partition] <= 0:
                    del group.pending_offset_commits[topic_partition]
        for delta, (topic_partition, (offset, epoch, metadata)) in enumerate(valid.items()):
            group.apply_offset(
                topic_partition,
                CommittedOffset(offset, epoch, metadata or "", timestamp, base + delta),
            )
            results[topic_partition] = ErrorCode.none
        return results

    def _commit_error(
        self, group: Group, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # the group only uses Kafka to store offsets
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        member.last_heartbeat = time.monotonic()
        return None

    async def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: OffsetRequest,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: a transactional batch, pending until the transaction ends."""
        if group_id is None:
            return dict.fromkeys(offsets, ErrorCode.invalid_group_id)
        group = self.groups.get(group_id) or Group(group_id)
        error = None
        if group.is_(GroupState.DEAD):
            error = ErrorCode.coordinator_not_available
        elif group.consumer is not None:
            error = group.consumer.validate_offset_commit(member_id, generation_id, True, 0)
        elif generation_id < 0 and group.is_(GroupState.EMPTY):
            pass  # a consumer outside group management, as Kafka allows
        elif group.is_static_member_fenced(group_instance_id, member_id or ""):
            error = ErrorCode.fenced_instance_id
        elif member_id and not group.has(member_id):
            error = ErrorCode.unknown_member_id
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is not None:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid = self._check_offsets(offsets, results)
        if not valid:
            return results
        timestamp = now_ms()
        records = self._offset_records(group_id, valid, timestamp)
        # May raise KafkaError (a fenced producer epoch): the handler answers it.
        partition, base = self._append(group_id, records, producer_id, producer_epoch)
        group = self.groups.setdefault(group_id, group)
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        for delta, (topic_partition, (offset, epoch, metadata)) in enumerate(valid.items()):
            pending[topic_partition] = CommittedOffset(
                offset, epoch, metadata or "", timestamp, base + delta
            )
        self._txn_groups.setdefault(producer_id, set()).add(group_id)
        try:
            await self._durable(partition, base + len(records))
        except KafkaError as error:
            for topic_partition in valid:  # never staged: the record was cut
                pending.pop(topic_partition, None)
            results.update(dict.fromkeys(valid, error.code))
            return results
        results.update(dict.fromkeys(valid, ErrorCode.none))
        return results

    def complete_transaction(self, producer_id: int, committed: bool, partition: int) -> None:
        """The COMMIT/ABORT marker is in ``partition``: apply or drop the pending offsets."""
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in list(group_ids):
            if self.offsets_partition_for(group_id) != partition:
                continue
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None:
                group.complete_txn_offsets(producer_id, committed)
        if not group_ids:
            del self._txn_groups[producer_id]

    def has_pending_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.has_pending_offsets((topic, partition))

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool,
    ) -> list[tuple[TopicPartition, int, int, str, ErrorCode]]:
        """OffsetFetch: (partition, offset, leader epoch, metadata, error); None = all."""
        group = self.groups.get(group_id)
        if group is not None and group.is_(GroupState.DEAD):
            group = None
        if partitions is None:
            if group is None:
                return []
            return [
                (tp, c.offset, c.leader_epoch, c.metadata, ErrorCode.none)
                for tp, c in sorted(group.offsets.items())
            ]
        answers = []
        for topic_partition in partitions:
            if group is not None and require_stable and group.has_pending_offsets(topic_partition):
                answers.append((topic_partition, -1, -1, "", ErrorCode.unstable_offset_commit))
                continue
            committed = group.offsets.get(topic_partition) if group is not None else None
            if committed is None:
                answers.append((topic_partition, -1, -1, "", ErrorCode.none))
            else:
                answers.append(
                    (
                        topic_partition,
                        committed.offset,
                        committed.leader_epoch,
                        committed.metadata,
                        ErrorCode.none,
                    )
                )
        return answers

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: only for partitions the group does not consume right now."""
        if not group_id:
            return ErrorCode.invalid_group_id, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        results: dict[TopicPartition, ErrorCode] = {}
        consumer = group.consumer
        if consumer is not None and not consumer.is_empty():
            subscribed = consumer.subscribed_topic_names(self.consumer_protocol.topic_metadata())
            deletable = []
            for topic_partition in partitions:
                if topic_partition[0] in subscribed:
                    results[topic_partition] = ErrorCode.group_subscribed_to_topic
                else:
                    deletable.append(topic_partition)
        elif group.is_(GroupState.EMPTY):
            deletable = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = []
            for topic_partition in partitions:
                if group.is_subscribed_to(topic_partition[0]):
                    results[topic_partition] = ErrorCode.group_subscribed_to_topic
                else:
                    deletable.append(topic_partition)
        else:
            return ErrorCode.non_empty_group, {}
        removed = [tp for tp in deletable if group.offsets.pop(tp, None) is not None]
        if removed:
            tombstones = [KeyValue(offset_key(group_id, t, p), None) for t, p in removed]
            try:
                await self._append_durably(group_id, tombstones)
            except KafkaError as error:
                return error.code, {}
        results.update(dict.fromkeys(deletable, ErrorCode.none))
        return ErrorCode.none, results

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
                partition, base = self._append(group_id, records)
            except KafkaError as error:
                results[group_id] = error.code
                continue
            group.offsets.clear()
            group.transition(GroupState.DEAD, now_ms())
            del self.groups[group_id]
            waits.append((group_id, self._durable(partition, base + len(records))))
            results[group_id] = ErrorCode.none
            log.info("deleted group %s", group_id)
        outcomes = await asyncio.gather(*(wait for _, wait in waits), return_exceptions=True)
        for (group_id, _), outcome in zip(waits, outcomes, strict=True):
            if isinstance(outcome, KafkaError):
                results[group_id] = outcome.code
        return results


def group_type(group: Group) -> str:
    return "consumer" if group.consumer is not None else GROUP_TYPE_CLASSIC


def group_state(group: Group) -> str:
    """Kafka's state name: a consumer group's (Empty, Assigning, ...) or a classic one's."""
    return group.consumer.state if group.consumer is not None else group.state.value


def _where(partition: PartitionLog, header) -> tuple[str, int, int]:
    return partition.topic, partition.partition, header.base_offset
