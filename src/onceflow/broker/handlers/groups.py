"""JoinGroup v0-9 (API 11), SyncGroup v0-5 (API 14), Heartbeat v0-4 (API 12), LeaveGroup v0-5
(API 13), ListGroups v0-5 (API 16), DescribeGroups v0-5 (API 15), DeleteGroups v0-2 (API 42):
the classic group protocol."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.coordinator.group import group_state, group_type
from onceflow.coordinator.group_metadata import GroupState
from onceflow.coordinator.group_requests import JoinGroupRequest, SyncGroupRequest
from onceflow.protocol.codec import NO_THROTTLE, build, element, fields_of
from onceflow.protocol.errors import ErrorCode, KafkaError

CONSUMER = "consumer"
NO_AUTHORIZED_OPERATIONS = -(2**31)
# READ, DELETE and DESCRIBE (AclOperation codes 3, 6, 8): everything, as there are no ACLs
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def milliseconds(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0]


def speaks_for(ctx: RequestContext, group_id: str, member_id: str | None) -> None:
    """Note that ``member_id`` of ``group_id`` uses this connection (for
    onceflow.group.leave.on.disconnect); an empty or None member id forgets the group."""
    if member_id:
        ctx.session.group_members[group_id] = member_id
    else:
        ctx.session.group_members.pop(group_id, None)


@handles(11, 0, 9)
async def join_group(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    cls = ctx.response_class
    session_timeout = milliseconds(request.session_timeout)
    rebalance_timeout = milliseconds(getattr(request, "rebalance_timeout", request.session_timeout))
    result = await ctx.broker.groups.classic.join_group(
        JoinGroupRequest(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            ctx.header.client_id or "",
            client_host(ctx),
            session_timeout,
            rebalance_timeout,
            request.protocol_type,
            [(protocol.name, protocol.metadata) for protocol in request.protocols],
            require_known_member_id=ctx.version >= 4,
            reason=getattr(request, "reason", None),
        )
    )
    speaks_for(ctx, request.group_id, result.member_id)
    member_cls = element(cls, "members")
    protocol_name = result.protocol_name
    if protocol_name is None and ctx.version < 7:
        protocol_name = ""  # not nullable before v7
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            build(member_cls, member_id=member_id, group_instance_id=instance_id, metadata=data)
            for member_id, instance_id, data in result.members
        ),
    )


PROTOCOL_IN_SYNC = 5  # SyncGroup v5+ must name the protocol type and name (KIP-559)


@handles(14, 0, 5)
async def sync_group(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    if ctx.version >= PROTOCOL_IN_SYNC and (
        request.protocol_type is None or request.protocol_name is None
    ):  # Kafka checks this before it looks at the group
        return build(
            ctx.response_class,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.inconsistent_group_protocol,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    result = await ctx.broker.groups.classic.sync_group(
        SyncGroupRequest(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {item.member_id: item.assignment for item in request.assignments},
        )
    )
    if result.error == ErrorCode.none:
        speaks_for(ctx, request.group_id, request.member_id)
    return build(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@handles(12, 0, 4)
async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    code = ctx.broker.groups.classic.heartbeat(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        request.generation_id,
    )
    if code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
        speaks_for(ctx, request.group_id, request.member_id)
    return build(ctx.response_class, throttle_time=NO_THROTTLE, error_code=code)


@handles(13, 0, 5)
async def leave_group(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    cls = ctx.response_class
    if ctx.version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(member.member_id, member.group_instance_id) for member in request.members]
    top, results = ctx.broker.groups.classic.leave_group(request.group_id, leaving)
    if ctx.session.group_members.get(request.group_id) in {m for m, _ in leaving}:
        speaks_for(ctx, request.group_id, None)
    if ctx.version < 3:
        code = top
        if code == ErrorCode.none and results:
            code = results[0][2]
        return build(cls, throttle_time=NO_THROTTLE, error_code=code)
    member_cls = element(cls, "members")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=top,
        members=tuple(
            member_cls(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for member_id, instance_id, code in results
        ),
    )


@handles(16, 0, 5)
async def list_groups(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    groups = ctx.broker.groups.list_groups(
        list(getattr(request, "states_filter", ()) or ()),
        list(getattr(request, "types_filter", ()) or ()),
    )
    group_cls = element(cls, "groups")
    visible = rules.visible_groups(ctx, (group.group_id for group in groups))
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(
            build(
                group_cls,
                group_id=group.group_id,
                protocol_type=CONSUMER if group.consumer is not None else group.protocol_type or "",
                group_state=group_state(group),
                group_type=group_type(group),
            )
            for group in groups
            if group.group_id in visible
        ),
    )


@handles(15, 0, 5)
async def describe_groups(ctx: RequestContext, request: Any) -> Any:
    cls, group_cls, member_cls = ctx.response_classes("groups", "members")
    groups = ctx.broker.groups
    wanted = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        operations = rules.authorized_operations(
            ctx, rules.GROUP, group_id, wanted, GROUP_AUTHORIZED_OPERATIONS
        )
        allowed = rules.allowed(ctx, rules.DESCRIBE, rules.GROUP, group_id)
        try:
            group = groups.describe_group(group_id) if allowed else None
        except KafkaError as error:
            code, message, state, group = error.code, error.message, "", None
            if code == ErrorCode.group_id_not_found:  # not a classic group: v0-5 say Dead
                code, message, state = ErrorCode.none, None, GroupState.DEAD.value
        else:
            code = ErrorCode.none if allowed else ErrorCode.group_authorization_failed
            message, state = None, GroupState.DEAD.value if allowed else ""
        if group is None:  # an error, or no such group: an entry without members
            described.append(
                build(
                    group_cls,
                    error_code=code,
                    error_message=message,
                    group_id=group_id,
                    group_state=state,
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=operations,
                )
            )
            continue
        stable = group.is_(GroupState.STABLE)
        described.append(
            build(
                group_cls,
                error_code=ErrorCode.none,
                group_id=group.group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=tuple(
                    build(
                        member_cls,
                        **fields_of(
                            member, "member_id", "group_instance_id", "client_id", "client_host"
                        ),
                        member_metadata=member.metadata_for(group.protocol_name) if stable else b"",
                        member_assignment=member.assignment if stable else b"",
                    )
                    for member in group.members.values()
                ),
                authorized_operations=operations,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(described))


@handles(42, 0, 2)
async def delete_groups(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls = ctx.response_classes("results")
    allowed = [g for g in request.groups_names if rules.allowed(ctx, rules.DELETE, rules.GROUP, g)]
    results = await ctx.broker.groups.delete_groups(allowed) if allowed else {}
    for group_id in request.groups_names:
        results.setdefault(group_id, ErrorCode.group_authorization_failed)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(
            result_cls(group_id=group_id, error_code=code) for group_id, code in results.items()
        ),
    )
