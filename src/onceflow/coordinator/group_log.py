"""``__consumer_offsets``, the group coordinator's log: which partition holds a group,
and the records that store a group's metadata and offsets (Kafka's binary formats, see
:mod:`group_records`)."""

from __future__ import annotations

import logging

from onceflow.clock import Clock
from onceflow.coordinator.group_metadata import Group
from onceflow.coordinator.group_records import GroupValue, MemberRecord, group_key, group_value
from onceflow.coordinator.internal_log import INTERNAL_TOPIC_CONFIG, Appended, append
from onceflow.log.batch import KeyValue
from onceflow.log.manager import LogManager
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


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


class GroupLog:
    def __init__(self, logs: LogManager, num_partitions: int, clock: Clock) -> None:
        self.logs = logs
        self.num_partitions = max(1, num_partitions)
        self.clock = clock

    def open(self) -> list[PartitionLog]:
        """The topic's partitions (created on first start); its partition count wins."""
        topic = self.logs.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None:
            topic = self.logs.create_topic(
                CONSUMER_OFFSETS_TOPIC, self.num_partitions, 1, INTERNAL_TOPIC_CONFIG, internal=True
            )
        self.num_partitions = len(topic.partitions)
        return topic.partitions

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of a group (Kafka's abs(hashCode) mod N)."""
        return kafka_abs(java_string_hash(group_id)) % self.num_partitions

    def _partition(self, group_id: str) -> PartitionLog:
        try:
            partition = self.logs.partition(CONSUMER_OFFSETS_TOPIC, self.partition_for(group_id))
        except KafkaError:
            raise KafkaError(
                ErrorCode.coordinator_not_available, f"{CONSUMER_OFFSETS_TOPIC} is missing"
            ) from None
        if partition.offline:
            raise KafkaError(ErrorCode.coordinator_not_available, partition.offline)
        return partition

    def append(
        self,
        group_id: str,
        records: list[KeyValue],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> Appended:
        return append(self._partition(group_id), records, producer_id, producer_epoch)

    async def append_durably(self, group_id: str, records: list[KeyValue]) -> Appended:
        appended = self.append(group_id, records)
        await appended.durable()
        return appended

    def group_record(self, group: Group, assignments: dict[str, bytes] | None = None) -> KeyValue:
        members = [
            MemberRecord(
                *member.joined(),
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
            self.clock.now_ms(),
            members,
        )
        return KeyValue(group_key(group.group_id), group_value(value))

    async def store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> None:
        """Persist the group metadata; returns once it is durable."""
        await self.append_durably(group.group_id, [self.group_record(group, assignments)])

    def store_group_soon(self, group: Group) -> None:
        """Persist the group metadata without waiting for the fsync."""
        try:
            self.append(group.group_id, [self.group_record(group)])
        except KafkaError as error:
            log.warning("cannot store metadata of group %s: %s", group.group_id, error)
