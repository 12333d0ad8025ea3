"""ApiVersions v0-3: the versions of every API this broker implements."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import HANDLERS, handles
from onceflow.protocol.codec import build, element
from onceflow.protocol.errors import ErrorCode


def api_versions_response(cls: type, code: ErrorCode = ErrorCode.none) -> Any:
    entry = element(cls, "api_keys")
    keys = tuple(
        entry(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    )
    return build(cls, error_code=code, api_keys=keys, throttle_time=datetime.timedelta(0))


@handles(18, 0, 3)
async def api_versions(ctx: RequestContext, request: Any) -> Any:
    return api_versions_response(ctx.response_class)
