"""FindCoordinator v0-4 (API 10): this broker coordinates every group and transactional id."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import build, element
from onceflow.protocol.errors import ErrorCode

KEY_TYPES = (0, 1)  # 0: consumer group, 1: transactional id


@handles(10, 0, 4)
async def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    cls = ctx.response_class
    key_type = getattr(request, "key_type", 0)
    code = ErrorCode.none if key_type in KEY_TYPES else ErrorCode.invalid_request
    message = None if code == ErrorCode.none else f"unknown coordinator key type {key_type}"
    node = broker.node_id if code == ErrorCode.none else -1
    host = ctx.advertised_host if code == ErrorCode.none else ""
    port = ctx.advertised_port if code == ErrorCode.none else -1
    if ctx.version >= 4:  # batched form: one answer per key
        entry = element(cls, "coordinators")
        answers = []
        for key in request.coordinator_keys:
            denied = code == ErrorCode.none and rules.coordinator_key_denial(ctx, key_type, key)
            answers.append(
                entry(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=message,
                )
                if not denied
                else entry(
                    key=key, node_id=-1, host="", port=-1, error_code=denied, error_message=None
                )
            )
        return build(cls, throttle_time=datetime.timedelta(0), coordinators=tuple(answers))
    denied = code == ErrorCode.none and rules.coordinator_key_denial(ctx, key_type, request.key)
    if denied:
        code, message, node, host, port = denied, None, -1, "", -1
    return build(
        cls,
        throttle_time=datetime.timedelta(0),
        error_code=code,
        error_message=message,
        node_id=node,
        host=host,
        port=port,
    )
