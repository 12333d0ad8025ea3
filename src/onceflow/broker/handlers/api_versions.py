"""ApiVersions v0-4 (API 18): the versions of every API this broker implements, and (v3+) the
features: ``transaction.version`` 2 (KIP-890 part 2) and ``group.version`` 1 (KIP-848),
supported and finalized, so clients that know them use them.

Both features' supported range starts at 0, which clients older than v4 may fail to read
(KAFKA-17492): below v4 they are left out of the supported features, as Kafka does, and
only the finalized levels are sent."""

from __future__ import annotations

import re
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import HANDLERS, handles
from onceflow.protocol.codec import NO_THROTTLE, build, element, field_names
from onceflow.protocol.errors import ErrorCode

FEATURE_MIN_VERSION_ZERO_SINCE = 4


def api_versions_response(cls: type, code: ErrorCode = ErrorCode.none) -> Any:
    entry = element(cls, "api_keys")
    keys = tuple(
        entry(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    )
    features: dict[str, Any] = {}
    if "supported_features" in field_names(cls):
        supported = element(cls, "supported_features")
        finalized = element(cls, "finalized_features")
        features = {
            "supported_features": tuple(
                supported(name=name, min_version=0, max_version=level)
                for name, level in FEATURES.items()
                if cls.__version__ >= FEATURE_MIN_VERSION_ZERO_SINCE
            ),
            "finalized_features_epoch": FEATURES_EPOCH,
            "finalized_features": tuple(
                finalized(name=name, max_version_level=level, min_version_level=level)
                for name, level in FEATURES.items()
            ),
        }
    return build(
        cls,
        error_code=code,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        **features,
    )


FEATURES = {"group.version": 1, "transaction.version": 2}
FEATURES_EPOCH = 1


# Kafka's rule for v3+ client software names and versions (KIP-511).
SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handles(18, 0, 4)
async def api_versions(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 3 and not all(
        SOFTWARE_NAME.fullmatch(value or "")
        for value in (request.client_software_name, request.client_software_version)
    ):
        return build(
            ctx.response_class,
            error_code=ErrorCode.invalid_request,
            api_keys=(),
            throttle_time=NO_THROTTLE,
        )
    return api_versions_response(ctx.response_class)
