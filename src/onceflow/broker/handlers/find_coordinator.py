"""FindCoordinator v0-6 (API 10): this broker coordinates every group and transactional id;
share groups (key type 2, v6+) are not served."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import NO_ERROR, ErrorCode

KEY_TYPES = (0, 1)  # 0: consumer group, 1: transactional id


@handles(10, 0, 6)
async def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    key_type = getattr(request, "key_type", 0)
    if ctx.version >= 4:  # batched form: one answer per key
        entry = element(cls, "coordinators")
        answers = tuple(
            entry(key=key, **_coordinator(ctx, key_type, key)) for key in request.coordinator_keys
        )
        return build(cls, throttle_time=NO_THROTTLE, coordinators=answers)
    return build(cls, throttle_time=NO_THROTTLE, **_coordinator(ctx, key_type, request.key))


def _coordinator(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    """This broker as the coordinator of ``key``, or the error that says why not."""
    if key_type not in KEY_TYPES:
        code, message = ErrorCode.invalid_request, f"unknown coordinator key type {key_type}"
    else:
        code, message = rules.coordinator_key_denial(ctx, key_type, key) or ErrorCode.none, None
    if code != ErrorCode.none:
        return {"node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}
    return {
        "node_id": ctx.broker.node_id,
        "host": ctx.advertised_host,
        "port": ctx.advertised_port,
        **NO_ERROR,
    }
