"""The table of API handlers and the versions the broker advertises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onceflow.protocol.codec import models_version

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, ApiHandler] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register a handler for the versions that both it and kio's schemas support."""

    def register(function: Handler) -> Handler:
        versions = [
            version
            for version in range(min_version, max_version + 1)
            if models_version(api_key, version)
        ]
        if not versions:
            raise RuntimeError(f"kio models no version of API {api_key} in the range")
        HANDLERS[api_key] = ApiHandler(api_key, min(versions), max(versions), function)
        return function

    return register
