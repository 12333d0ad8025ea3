"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics (and broker reads)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TopicConfig,
    render_value,
    validate_topic_configs,
)
from onceflow.protocol.codec import build, element
from onceflow.protocol.errors import ErrorCode, KafkaError

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str
    source: int
    kind: str
    sensitive: bool = False


def describe_topic_configs(config: TopicConfig, keys: Any) -> list[DescribedConfig]:
    names = sorted(TOPIC_CONFIGS) if keys is None else [k for k in keys if k in TOPIC_CONFIGS]
    return [
        DescribedConfig(
            name,
            render_value(config[name]),
            SOURCE_DYNAMIC_TOPIC if name in config.overrides else SOURCE_DEFAULT,
            TOPIC_CONFIGS[name].kind,
        )
        for name in names
    ]


def describe_broker_configs(ctx: RequestContext, keys: Any) -> list[DescribedConfig]:
    names = sorted(BROKER_CONFIGS) if keys is None else [k for k in keys if k in BROKER_CONFIGS]
    return [
        DescribedConfig(
            name,
            render_value(ctx.broker.config[name]),
            SOURCE_STATIC_BROKER,
            BROKER_CONFIGS[name].kind,
            BROKER_CONFIGS[name].sensitive,
        )
        for name in names
    ]


@handles(32, 1, 4)
async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    result_cls = element(cls, "results")
    config_cls = element(result_cls, "configs")
    results = []
    for resource in request.resources:
        code, message, described = ErrorCode.none, None, []
        try:
            rules.config_resource_denial(
                ctx, rules.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            if resource.resource_type == RESOURCE_TOPIC:
                topic = ctx.broker.logs.get_topic(resource.resource_name)
                described = describe_topic_configs(topic.config, resource.configuration_keys)
            elif resource.resource_type == RESOURCE_BROKER:
                if resource.resource_name not in ("", str(ctx.broker.node_id)):
                    raise KafkaError(ErrorCode.invalid_request, "unknown broker id")
                described = describe_broker_configs(ctx, resource.configuration_keys)
            else:
                raise KafkaError(ErrorCode.invalid_request, "unsupported resource type")
        except KafkaError as error:
            code, message = error.code, error.message
        results.append(
            build(
                result_cls,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(
                    build(
                        config_cls,
                        name=entry.name,
                        value=None if entry.sensitive else entry.value,
                        read_only=entry.source == SOURCE_STATIC_BROKER,
                        config_source=entry.source,
                        is_sensitive=entry.sensitive,
                        synonyms=(),
                        config_type=CONFIG_TYPES[entry.kind],
                        documentation=None,
                    )
                    for entry in described
                ),
            )
        )
    return build(cls, throttle_time=datetime.timedelta(0), results=tuple(results))


def _alter(ctx: RequestContext, request: Any, compute: Any) -> Any:
    cls = ctx.response_class
    result_cls = element(cls, "responses")
    results = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        try:
            rules.config_resource_denial(
                ctx, rules.ALTER_CONFIGS, resource.resource_type, resource.resource_name
            )
            if resource.resource_type == RESOURCE_BROKER:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "dynamic broker configuration is not supported; restart with --config",
                )
            if resource.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.invalid_request, "unsupported resource type")
            topic = ctx.broker.logs.get_topic(resource.resource_name)
            overrides = validate_topic_configs(compute(topic.config, resource.configs))
            if not request.validate_only:
                ctx.broker.logs.set_topic_configs(topic.name, overrides)
        except KafkaError as error:
            code, message = error.code, error.message
        results.append(
            build(
                result_cls,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(cls, throttle_time=datetime.timedelta(0), responses=tuple(results))


@handles(33, 0, 2)
async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    def replace_all(config: TopicConfig, entries: Any) -> dict[str, Any]:
        return {entry.name: entry.value for entry in entries}

    return _alter(ctx, request, replace_all)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    def apply_operations(config: TopicConfig, entries: Any) -> dict[str, Any]:
        overrides = {name: render_value(value) for name, value in config.overrides.items()}
        for entry in entries:
            if entry.name not in TOPIC_CONFIGS:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Unknown topic config name: {entry.name}"
                )
            operation = entry.config_operation
            if operation == OP_SET:
                overrides[entry.name] = entry.value
            elif operation == OP_DELETE:
                overrides.pop(entry.name, None)
            elif operation in (OP_APPEND, OP_SUBTRACT):
                if TOPIC_CONFIGS[entry.name].kind != "list":
                    raise KafkaError(
                        ErrorCode.invalid_config, f"{entry.name} is not a list configuration"
                    )
                current = [v for v in render_value(config[entry.name]).split(",") if v]
                given = [v.strip() for v in (entry.value or "").split(",") if v.strip()]
                if operation == OP_APPEND:
                    current += [v for v in given if v not in current]
                else:
                    current = [v for v in current if v not in given]
                overrides[entry.name] = ",".join(current)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"unknown operation {operation}")
        return overrides

    return _alter(ctx, request, apply_operations)
