"""Reading kio's schema classes: field type hints, optional fields, nested entities.
Shared by the API-version walk and the differential harness's request builder."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any


@functools.cache
def field_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in (
        typing.get_args(hint)
    )


def without_none(hint: Any) -> Any:
    if is_optional(hint):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return hint


def nested_entity(hint: Any) -> type | None:
    """The kio entity class a hint holds (itself, or inside a tuple/optional), if any."""
    candidates = [hint]
    while candidates:
        candidate = candidates.pop()
        if dataclasses.is_dataclass(candidate):
            return candidate
        candidates.extend(typing.get_args(candidate))
    return None
