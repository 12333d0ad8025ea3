"""ConsumerGroupHeartbeat v0-1 (API 68), ConsumerGroupDescribe v0-1 (API 69): KIP-848 consumer
groups (``group.protocol=consumer``), with the ``uniform`` and ``range`` server-side assignors."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.handlers.groups import (
    GROUP_AUTHORIZED_OPERATIONS,
    client_host,
    milliseconds,
    speaks_for,
)
from onceflow.broker.operations import NOT_ASKED
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.coordinator.consumer_group import HeartbeatRequest
from onceflow.protocol.codec import NO_THROTTLE, build, element, field_names, fields_of
from onceflow.protocol.errors import NO_ERROR, ErrorCode, KafkaError


@handles(68, 0, 1)
async def consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    if request.subscribed_topic_names and rules.denied_topics(
        ctx, rules.DESCRIBE, request.subscribed_topic_names
    ):
        raise KafkaError(ErrorCode.topic_authorization_failed)
    cls = ctx.response_class
    protocol = ctx.broker.groups.consumer_protocol
    owned = None
    if request.topic_partitions is not None:
        owned = {t.topic_id: set(t.partitions) for t in request.topic_partitions if t.partitions}
    heartbeat = HeartbeatRequest(
        **fields_of(
            request,
            "group_id",
            "member_id",
            "member_epoch",
            "instance_id",
            "rack_id",
            "server_assignor",
        ),
        rebalance_timeout_ms=milliseconds(request.rebalance_timeout),
        subscribed_topic_names=None
        if request.subscribed_topic_names is None
        else list(request.subscribed_topic_names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
    )
    interval = datetime.timedelta(milliseconds=protocol.heartbeat_interval_ms)
    try:
        answer = protocol.heartbeat(heartbeat, ctx.version)
    except KafkaError as error:
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=error.code,
            error_message=error.message,
            member_id=None,
            member_epoch=0,  # Kafka's error answers carry the field's default
            heartbeat_interval=datetime.timedelta(0),
            assignment=None,
        )
    speaks_for(ctx, request.group_id, answer.member_id if answer.member_epoch >= 0 else None)
    assignment = None
    if answer.assignment is not None:
        assignment_cls = element(cls, "assignment")
        partitions_cls = element(assignment_cls, "topic_partitions")
        assignment = assignment_cls(
            topic_partitions=tuple(
                partitions_cls(topic_id=topic, partitions=tuple(sorted(numbers)))
                for topic, numbers in sorted(answer.assignment.items())
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        **NO_ERROR,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        # a member that left is told no interval, as Kafka does
        heartbeat_interval=interval if answer.member_epoch >= 0 else datetime.timedelta(0),
        assignment=assignment,
    )


@handles(69, 0, 1)
async def consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    cls, group_cls, member_cls, assignment_cls, partitions_cls = ctx.response_classes(
        "groups", "members", "assignment", "topic_partitions"
    )
    protocol = ctx.broker.groups.consumer_protocol
    operations = GROUP_AUTHORIZED_OPERATIONS if request.include_authorized_operations else NOT_ASKED

    def described(assignment: dict) -> Any:
        return assignment_cls(
            topic_partitions=tuple(
                partitions_cls(
                    topic_id=topic,
                    topic_name=protocol.topic_name(topic) or "",
                    partitions=tuple(sorted(numbers)),
                )
                for topic, numbers in sorted(assignment.items())
            )
        )

    groups = []
    for group_id in request.group_ids:
        try:
            rules.require(ctx, rules.DESCRIBE, rules.GROUP, group_id)
            group = protocol.describe(group_id)
        except KafkaError as error:
            groups.append(
                build(
                    group_cls,
                    error_code=error.code,
                    error_message=error.message,
                    group_id=group_id,
                    group_state="",  # Kafka's error entries carry the fields' defaults
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=(),
                    authorized_operations=operations,
                )
            )
            continue
        members = tuple(
            build(
                member_cls,
                **fields_of(
                    member,
                    "member_id",
                    "instance_id",
                    "rack_id",
                    "member_epoch",
                    "client_id",
                    "client_host",
                    "subscribed_topic_names",
                ),
                subscribed_topic_regex=member.subscribed_topic_regex or "",  # as Kafka
                assignment=described(member.assigned),
                target_assignment=described(group.target.get(member.member_id, {})),
                member_type=1 if "member_type" in field_names(member_cls) else None,
            )
            for member in group.members.values()
        )
        groups.append(
            build(
                group_cls,
                **NO_ERROR,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor_name,
                members=members,
                authorized_operations=operations,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(groups))
