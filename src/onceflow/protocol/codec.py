"""Request/response codecs on top of kio's generated schemas.

A request frame is ``size:int32`` followed by a request header and a body. The header
version follows from the API's flexibility at that version (v2 for flexible versions, v1
otherwise); responses use header v1 for flexible versions except ApiVersions, whose
response header never has tagged fields so that any client can read it.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import io
import logging
import struct
import typing
import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_entity_module
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32

from onceflow.protocol.legacy.derived import derived_module, is_derived

API_VERSIONS_KEY = 18
NO_THROTTLE = datetime.timedelta(0)  # the broker never throttles
log = logging.getLogger(__name__)
HEADER_PREFIX = struct.Struct(">hhi")


class MalformedRequest(Exception):
    """The request cannot be parsed; Kafka closes the connection in this case."""


@dataclasses.dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


LEGACY_SCHEMAS = {(2, 0): "onceflow.protocol.legacy.list_offsets_v0"}


@functools.cache
def _entity_class(api_key: int, version: int, entity_type: EntityType) -> type | None:
    legacy = LEGACY_SCHEMAS.get((api_key, version))
    name = api_key_map.get(api_key)
    derived = derived_module(api_key, version, entity_type)
    if derived is not None:
        module = derived
    elif legacy is not None:
        module = importlib.import_module(legacy)
    elif name is None:
        return None
    else:
        try:
            module = load_entity_module(name, version, entity_type)
        except Exception:  # kio raises UnknownEntity for versions it does not model
            return None
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and getattr(value, "__type__", None) == entity_type
            and getattr(value, "__api_key__", None) == api_key
        ):
            return value
    return None


def models_version(api_key: int, version: int) -> bool:
    """Whether a request and a response schema exist for (api_key, version), found in
    kio's index without importing them (importing every version of every API is most of
    a broker's start)."""
    if (api_key, version) in LEGACY_SCHEMAS or is_derived(api_key, version):
        return True
    entities = schema_name_map.get(api_key_map.get(api_key, ""), {}).get(version, {})
    return EntityType.request in entities and EntityType.response in entities


def request_class(api_key: int, version: int) -> type | None:
    return _entity_class(api_key, version, EntityType.request)


def response_class(api_key: int, version: int) -> type | None:
    return _entity_class(api_key, version, EntityType.response)


@functools.cache
def _reader(cls: type) -> Callable[[bytes, int], tuple[Any, int]]:
    return entity_reader(cls)


@functools.cache
def _writer(cls: type) -> Callable[[io.BytesIO, Any], None]:
    return entity_writer(cls)


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, or MalformedRequest."""
    if len(frame) < HEADER_PREFIX.size:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a header")
    return HEADER_PREFIX.unpack_from(frame, 0)


def decode_request(frame: bytes, cls: type) -> tuple[RequestHeader, Any]:
    """Decode header and body of a frame whose API and version kio models as ``cls``."""
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    try:
        header, header_size = _reader(header_cls)(frame, 0)
        body, body_size = _reader(cls)(frame, header_size)
    except Exception as error:
        raise MalformedRequest(f"cannot decode {cls.__name__}: {error}") from error
    trailing = len(frame) - header_size - body_size
    if trailing < 0:
        raise MalformedRequest(f"{cls.__name__} v{cls.__version__} overruns its frame")
    if trailing:  # Kafka's parser ignores trailing bytes too; some clients send them
        log.debug(
            "%s v%d: %d trailing bytes (frame starts %s)",
            cls.__name__,
            cls.__version__,
            trailing,
            frame[:48].hex(),
        )
    return (
        RequestHeader(
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
        ),
        body,
    )


def encode_response(api_key: int, correlation_id: int, response: Any) -> bytes:
    """Frame a response: size, response header, body."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    cls = type(response)
    if cls.__flexible__ and api_key != API_VERSIONS_KEY:
        _writer(ResponseHeaderV1)(buffer, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        _writer(ResponseHeaderV0)(buffer, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    _writer(cls)(buffer, response)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def error_response(cls: type, code: ErrorCode) -> Any:
    """A response of type ``cls`` carrying ``code`` in its top-level error field.

    Used for APIs the broker knows but does not implement, and for unexpected failures:
    collections are left empty, numbers at their null values.
    """
    values = {}
    for field in dataclasses.fields(cls):
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        if has_default and field.name != "error_code":
            continue
        values[field.name] = _null_value(field, code)
    return cls(**values)


def _null_value(field: dataclasses.Field, code: ErrorCode) -> Any:
    if field.name == "error_code":
        return code
    kafka_type = field.metadata.get("kafka_type")
    if kafka_type is None:  # a nested entity array
        return ()
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type in ("bytes", "records"):
        return None if "None" in str(field.type) else b""
    if kafka_type == "string":
        return None if "None" in str(field.type) else ""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "error_code":
        return code
    return -1 if "int" in kafka_type else 0


@functools.cache
def field_names(cls: type) -> frozenset[str]:
    return frozenset(field.name for field in dataclasses.fields(cls))


@functools.cache
def element(cls: type, field_name: str) -> type:
    """The entity class held by the tuple field ``field_name`` of ``cls``."""
    hint = typing.get_type_hints(cls)[field_name]
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate):
            return candidate
        for inner in typing.get_args(candidate):
            if dataclasses.is_dataclass(inner):
                return inner
    raise TypeError(f"{cls.__name__}.{field_name} holds no entity")


def fields_of(source: object, *names: str) -> dict[str, Any]:
    """``source``'s attributes ``names``, as keyword arguments for an entity whose fields
    are named the same."""
    return {name: getattr(source, name) for name in names}


def build(cls: type, **values: Any) -> Any:
    """Instantiate a kio entity, dropping fields this version of the schema lacks."""
    names = field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})
