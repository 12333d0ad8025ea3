"""The group coordinator's side of KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

A group id is either a classic group or a consumer group. A consumer group lives beside
the classic ``Group`` record that keeps the group's committed offsets (``group.consumer``);
an empty group of one kind becomes the other when a member of the other kind joins, and a
non-empty group refuses members of the other kind with GROUP_ID_NOT_FOUND, as Kafka does
with ``group.consumer.migration.policy=disabled`` (onceflow does not convert live groups).
"""

from __future__ import annotations

import logging
import uuid

from onceflow.clock import Clock
from onceflow.config import BrokerConfig
from onceflow.coordinator.consumer_group import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicMetadata,
)
from onceflow.coordinator.group_metadata import Group, GroupState, GroupTable
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def not_classic(group: Group | None) -> bool:
    """A group that consumer-protocol members are in: classic requests are refused."""
    return group is not None and group.consumer is not None and not group.consumer.is_empty()


def topic_metadata(logs: LogManager) -> TopicMetadata:
    """The user topics' ids and partition counts, as assignors see them."""
    topics = [topic for topic in logs.topics.values() if not topic.internal]
    return TopicMetadata(
        {topic.name: topic.topic_id for topic in topics},
        {topic.topic_id: len(topic.partitions) for topic in topics},
    )


class ConsumerProtocol:
    def __init__(
        self, groups: GroupTable, logs: LogManager, config: BrokerConfig, clock: Clock
    ) -> None:
        self.groups = groups
        self.logs = logs
        self.config = config
        self.clock = clock

    @property
    def session_timeout_ms(self) -> int:
        return self.config["group.consumer.session.timeout.ms"]

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.config["group.consumer.heartbeat.interval.ms"]

    def topic_metadata(self) -> TopicMetadata:
        return topic_metadata(self.logs)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for topic in self.logs.topics.values():
            if topic.topic_id == topic_id:
                return topic.name
        return None

    def heartbeat(self, request: HeartbeatRequest, version: int) -> HeartbeatResponse:
        self._validate(request, version)
        if not request.member_id:
            request.member_id = str(uuid.uuid4())
        groups = self.groups
        group = groups.get(request.group_id)
        if group is not None and group.is_(GroupState.DEAD):
            raise KafkaError(ErrorCode.coordinator_not_available)
        if group is None or group.consumer is None:
            if request.member_epoch != JOIN_EPOCH:
                raise KafkaError(
                    ErrorCode.group_id_not_found, f"Consumer group {request.group_id} not found."
                )
            if group is not None and not group.is_(GroupState.EMPTY):
                raise KafkaError(
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a consumer group.",
                )
            group = groups.get_or_create(request.group_id)
            assignors = tuple(self.config["group.consumer.assignors"].split(","))
            group.consumer = ConsumerGroup(request.group_id, assignors)
        consumer = group.consumer
        epoch_before = consumer.group_epoch
        answer = consumer.heartbeat(request, self.topic_metadata(), self.clock.monotonic())
        if consumer.group_epoch != epoch_before:
            log.info(
                "consumer group %s at epoch %d (%s, %d members)",
                consumer.group_id,
                consumer.group_epoch,
                consumer.state,
                len(consumer.members),
            )
        return answer

    def _validate(self, request: HeartbeatRequest, version: int) -> None:
        def invalid(message: str) -> KafkaError:
            return KafkaError(ErrorCode.invalid_request, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if version >= 1 and not request.member_id:
            raise invalid("MemberId can't be empty.")
        if request.instance_id is not None and not request.instance_id:
            raise invalid("InstanceId can't be empty.")
        if request.member_epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif request.member_epoch < -2:
            raise invalid(f"MemberEpoch {request.member_epoch} is invalid.")
        elif request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
            raise invalid("InstanceId can't be null when MemberEpoch is -2.")
        elif not request.member_id:
            raise invalid("MemberId can't be empty.")

    def tick(self, now: float) -> None:
        for group in list(self.groups.values()):
            consumer = group.consumer
            if consumer is None or consumer.is_empty():
                continue
            for member_id in consumer.expire(now, self.session_timeout_ms):
                log.info(
                    "member %s of consumer group %s expired (session or revocation timeout)",
                    member_id,
                    consumer.group_id,
                )

    def member_disconnected(self, consumer: ConsumerGroup, member_id: str) -> None:
        """The member's connection closed: it leaves now, as if its session had expired."""
        if member_id in consumer.members:
            consumer.remove(member_id)
            log.info(
                "member %s of consumer group %s disconnected, removing it "
                "(onceflow.group.leave.on.disconnect)",
                member_id,
                consumer.group_id,
            )

    def describe(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if group.consumer is None:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
        return group.consumer
