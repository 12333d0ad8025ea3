"""Requests from plain data: ``make_request(api_key, version, {...})`` builds the kio
entity of that version, nested lists of dicts included, and fills every field the data
leaves out with a neutral value, so one scenario step serves every version."""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from typing import Any

from onceflow.protocol.codec import request_class
from tests.kio_hints import field_hints, is_optional, nested_entity, without_none

# Values for fields a step leaves out, by field name, wherever the field is.
DEFAULTS: dict[str, Any] = {
    "replica_id": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "timestamp": -1,
    "max_num_offsets": 1,
    "current_leader_epoch": -1,
    "leader_epoch": -1,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "session_id": 0,
    "session_epoch": -1,
    "generation_id": -1,
    "member_epoch": 0,
    "acks": -1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "min_bytes": 1,
    "num_partitions": -1,
    "replication_factor": -1,
    "timeout": 5000,
    "timeout_ms": 5000,
    "max_wait": 0,
    "session_timeout": 30000,
    "rebalance_timeout": 30000,
    "transaction_timeout": 60000,
    "committed_leader_epoch": -1,
    "isolation_level": 0,
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
    "key_type": 0,
    "rack_id": None,
    "group_instance_id": None,
    "transactional_id": None,
    "protocol_type": "consumer",
    "reason": None,
    "retention_time": -1,
    "max_records": 100,
    "state_filters": (),
    "types_filter": (),
    "producer_id_filters": (),
    "duration_filter": -1,
    "require_stable": False,
    "include_synonyms": False,
    "include_documentation": False,
    "validate_only": False,
    "committed_metadata": None,
    "transactional_id_filter": None,
    "server_assignor": None,
    "subscribed_topic_regex": None,
    "subscribed_topic_names": None,
    "topic_partitions": None,
    "instance_id": None,
    "rack": None,
    "client_rack_id": None,
    "cluster_id": None,
    "replica_state": None,
    "rack_id_": None,
    "assignments": (),
    "configs": (),
    "forgotten_topics_data": (),
}


def make_request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    cls = request_class(api_key, version)
    if cls is None:
        raise LookupError(f"kio models no request for api {api_key} v{version}")
    return _entity(cls, data)


def _entity(cls: type, data: dict[str, Any]) -> Any:
    hints = field_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kafka_type = field.metadata.get("kafka_type")
        hint = hints[field.name]
        if field.name in data:
            values[field.name] = _value(hint, kafka_type, data[field.name])
        elif _has_default(field):
            continue
        elif field.name in DEFAULTS:
            values[field.name] = _value(hint, kafka_type, DEFAULTS[field.name])
        else:
            values[field.name] = _neutral(hint, kafka_type)
    return cls(**values)


def _value(hint: Any, kafka_type: str | None, value: Any) -> Any:
    if value is None:
        return None
    nested = nested_entity(hint)
    if nested is not None:
        if isinstance(value, dict):
            return _entity(nested, value)
        return tuple(_entity(nested, item) if isinstance(item, dict) else item for item in value)
    if kafka_type is None:
        return value
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type.startswith("datetime") and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "uuid" and isinstance(value, int):
        return uuid.UUID(int=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _neutral(hint: Any, kafka_type: str | None) -> Any:
    optional = is_optional(hint)
    if nested_entity(hint) is not None:
        return None if optional and typing.get_origin(without_none(hint)) is not tuple else ()
    if typing.get_origin(without_none(hint)) is tuple:
        return ()
    if kafka_type is None:
        return None
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type == "string":
        return None if optional else ""
    if kafka_type in ("bytes", "records"):
        return None if optional else b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    return 0


def _has_default(field: dataclasses.Field) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )
