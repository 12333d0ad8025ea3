"""Versions Kafka 4.0 removed whose schema is the next version kio models with some fields
left out (and, for DescribeConfigs v0, one field in place of another), per Kafka 3.9's JSON
schemas. Their entity classes are derived from kio's at first use instead of written out."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_entity_module
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True)
class Replacement:
    """A field of this version standing where a field of the source version stands."""

    name: str
    kafka_type: str
    python_type: Any
    default: Any


@dataclass(frozen=True)
class Derivation:
    source: int  # the kio version whose classes this version's are derived from
    drop_request: frozenset[str] = frozenset()
    drop_response: frozenset[str] = frozenset()
    replace_response: Mapping[str, Replacement] = field(default_factory=dict)
    add_request_after: Mapping[str, Replacement] = field(default_factory=dict)


NO_THROTTLE = frozenset({"throttle_time"})
PATTERN_TYPES = frozenset({"pattern_type", "pattern_type_filter", "resource_pattern_type"})

DERIVED: dict[tuple[int, int], Derivation] = {
    # OffsetCommit v1: generation and member (v1+), a commit timestamp (v1 only), no
    # retention time (v2-4); v0 also has no generation or member.
    (8, 1): Derivation(
        2,
        drop_request=frozenset({"retention_time"}),
        add_request_after={"committed_offset": Replacement("commit_timestamp", "int64", int, -1)},
    ),
    (8, 0): Derivation(
        2, drop_request=frozenset({"retention_time", "generation_id_or_member_epoch", "member_id"})
    ),
    (9, 0): Derivation(1),  # OffsetFetch v0 is v1
    (19, 1): Derivation(2, drop_response=NO_THROTTLE),  # CreateTopics
    (19, 0): Derivation(
        2,
        drop_request=frozenset({"validate_only"}),
        drop_response=NO_THROTTLE | {"error_message"},
    ),
    (20, 0): Derivation(1, drop_response=NO_THROTTLE),  # DeleteTopics
    (27, 0): Derivation(1),  # WriteTxnMarkers v0 is v1 before flexible versions
    (29, 0): Derivation(1, drop_request=PATTERN_TYPES, drop_response=PATTERN_TYPES),
    (30, 0): Derivation(1, drop_request=PATTERN_TYPES),  # CreateAcls
    (31, 0): Derivation(1, drop_request=PATTERN_TYPES, drop_response=PATTERN_TYPES),
    (32, 0): Derivation(  # DescribeConfigs: is_default where v1 has the config source
        1,
        drop_request=frozenset({"include_synonyms"}),
        drop_response=frozenset({"synonyms"}),
        replace_response={"config_source": Replacement("is_default", "bool", bool, False)},
    ),
    (34, 0): Derivation(1),  # AlterReplicaLogDirs v0 is v1
    (35, 0): Derivation(1),  # DescribeLogDirs v0 is v1
}


@functools.cache
def is_derived(api_key: int, version: int) -> bool:
    return (api_key, version) in DERIVED


def derived_module(api_key: int, version: int, entity_type: EntityType) -> types.ModuleType | None:
    """A module holding the classes of (api_key, version)'s request or response."""
    derivation = DERIVED.get((api_key, version))
    if derivation is None:
        return None
    source = load_entity_module(api_key_map[api_key], derivation.source, entity_type)
    request = entity_type == EntityType.request
    builder = _Builder(
        version,
        RequestHeader if request else ResponseHeader,
        derivation.drop_request if request else derivation.drop_response,
        {} if request else dict(derivation.replace_response),
        dict(derivation.add_request_after) if request else {},
    )
    module = types.ModuleType(f"{__name__}.{api_key_map[api_key]}_v{version}_{entity_type.name}")
    for value in list(vars(source).values()):
        if isinstance(value, type) and value.__module__ == source.__name__:
            derived = builder.derive(value)
            setattr(module, derived.__name__, derived)
    return module


@dataclass
class _Builder:
    version: int
    header: type
    drop: frozenset[str]
    replace: dict[str, Replacement]
    add_after: dict[str, Replacement]
    done: dict[type, type] = field(default_factory=dict)

    def derive(self, cls: type) -> type:
        if cls in self.done:
            return self.done[cls]
        hints = typing.get_type_hints(cls)
        fields: list[tuple[str, Any, Any]] = []
        for source in dataclasses.fields(cls):
            if source.name in self.drop:
                continue
            if source.name in self.replace:
                fields.append(self._field(self.replace[source.name]))
                continue
            default: Any = dataclasses.MISSING
            if source.default is not dataclasses.MISSING:
                default = source.default
            kwargs: dict[str, Any] = {"metadata": source.metadata}
            if default is not dataclasses.MISSING:
                kwargs["default"] = default
            elif source.default_factory is not dataclasses.MISSING:
                kwargs["default_factory"] = source.default_factory
            fields.append((source.name, self._retyped(hints[source.name]), field(**kwargs)))
            if source.name in self.add_after:
                fields.append(self._field(self.add_after[source.name]))
        derived = dataclasses.make_dataclass(
            cls.__name__,
            fields,
            namespace={
                "__type__": cls.__type__,
                "__version__": i16(self.version),
                "__flexible__": False,
                "__api_key__": cls.__api_key__,
                "__header_schema__": self.header,
            },
            frozen=True,
            slots=True,
            kw_only=True,
        )
        self.done[cls] = derived
        return derived

    def _field(self, replacement: Replacement) -> tuple[str, Any, Any]:
        return (
            replacement.name,
            replacement.python_type,
            field(metadata={"kafka_type": replacement.kafka_type}, default=replacement.default),
        )

    def _retyped(self, hint: Any) -> Any:
        """``hint`` with every entity class in it replaced by its derived class."""
        if not _holds_entity(hint):
            return hint
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self.derive(hint)
        origin = typing.get_origin(hint)
        if origin is tuple:
            (item, _) = typing.get_args(hint)
            return tuple[self._retyped(item), ...]
        if origin in (types.UnionType, typing.Union):
            retyped = [self._retyped(arg) for arg in typing.get_args(hint)]
            return functools.reduce(lambda a, b: a | b, retyped)
        return hint


def _holds_entity(hint: Any) -> bool:
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return True
    return any(_holds_entity(arg) for arg in typing.get_args(hint))
