"""Start-up: rebuild every group and its offsets from ``__consumer_offsets``.

Records are applied in log order, as Kafka's ``GroupMetadataManager`` loads them: an
offset record sets (or, as a tombstone, removes) one committed offset, a group record
replaces the group's members, and transactional offset records stay pending until the
COMMIT or ABORT marker that ends their transaction.
"""

from __future__ import annotations

import logging

from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.coordinator.group_metadata import (
    CommittedOffset,
    GroupState,
    GroupTable,
    JoinResult,
    Member,
)
from onceflow.coordinator.group_offsets import OffsetStore
from onceflow.coordinator.group_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    RecordFormatError,
    parse_group_value,
    parse_key,
    parse_offset_value,
)
from onceflow.log.batch import CONTROL_COMMIT, KeyValue, control_type_of, read_key_values
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupReplay:
    def __init__(self, groups: GroupTable, offsets: OffsetStore) -> None:
        self.groups = groups
        self.offsets = offsets

    def partition(self, partition: PartitionLog) -> None:
        number = partition.partition
        for header, data in partition.iter_batches():
            header.position = 0
            if header.is_control:
                committed = control_type_of(data, header) == CONTROL_COMMIT
                self.offsets.complete_transaction(header.producer_id, committed, number)
                continue
            try:
                records = read_key_values(data, header)
            except ValueError as error:
                log.warning(
                    "skipping %s batch at %d: %s", partition.name, header.base_offset, error
                )
                continue
            producer_id = header.producer_id if header.is_transactional else -1
            for delta, record in enumerate(records):
                try:
                    self.record(record, header.base_offset + delta, producer_id)
                except (RecordFormatError, UnicodeDecodeError) as error:
                    log.warning(
                        "skipping %s record at offset %d: %s",
                        CONSUMER_OFFSETS_TOPIC,
                        header.base_offset + delta,
                        error,
                    )

    def record(self, record: KeyValue, offset: int, producer_id: int) -> None:
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
            group = self.groups.get_or_create(key.group_id)
            if producer_id >= 0:
                self.offsets.stage(group, producer_id, topic_partition, committed)
            else:
                group.apply_offset(topic_partition, committed)
        elif isinstance(key, GroupKey):
            if record.value is None:
                group = self.groups.pop(key.group_id, None)
                if group is not None and (group.offsets or group.pending_txn_offsets):
                    fresh = self.groups.get_or_create(key.group_id)
                    fresh.offsets = group.offsets
                    fresh.pending_txn_offsets = group.pending_txn_offsets
                return
            self._load_group(key.group_id, parse_group_value(record.value))

    def _load_group(self, group_id: str, value: GroupValue) -> None:
        group = self.groups.get_or_create(group_id)
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
                    *record.joined(),
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
