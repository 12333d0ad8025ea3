"""DescribeConfigs v0-4 (API 32), AlterConfigs v0-2 (API 33), IncrementalAlterConfigs v0-1 (API
44): topics and the broker.

Broker configs that Kafka changes at runtime and onceflow reads live (the topic defaults
such as ``log.retention.ms``) can be set for this broker or cluster-wide; the others are
refused with INVALID_REQUEST, as Kafka refuses its static ones.
"""

from __future__ import annotations

from typing import Any

from onceflow.broker import dynamic_configs
from onceflow.broker.config_description import (
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    DescribedConfig,
    describe_broker_configs,
    describe_topic_configs,
)
from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    render_value,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from onceflow.protocol.codec import NO_THROTTLE, build, element, field_names
from onceflow.protocol.errors import ErrorCode, ErrorOutcome, KafkaError

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@handles(32, 0, 4)
async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls, config_cls = ctx.response_classes("results", "configs")
    synonym_cls = element(config_cls, "synonyms") if "synonyms" in field_names(config_cls) else None
    with_synonyms = getattr(request, "include_synonyms", False) and synonym_cls is not None
    results = []
    for resource in request.resources:
        described = []
        with ErrorOutcome() as outcome:
            rules.config_resource_denial(
                ctx, rules.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            keys = resource.configuration_keys
            if resource.resource_type == RESOURCE_TOPIC:
                if not resource.resource_name:
                    raise KafkaError(ErrorCode.invalid_topic_exception, "empty topic name")
                topic = ctx.broker.logs.get_topic(resource.resource_name)
                described = describe_topic_configs(topic.config, keys)
            elif resource.resource_type == RESOURCE_BROKER:
                _broker_layer(ctx, resource.resource_name)
                described = describe_broker_configs(ctx.broker, keys)
            else:
                raise KafkaError(ErrorCode.invalid_request, "unsupported resource type")
        results.append(
            _resource_result(
                result_cls,
                resource,
                outcome,
                configs=tuple(
                    _config_entry(config_cls, synonym_cls if with_synonyms else None, entry)
                    for entry in described
                ),
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _config_entry(config_cls: type, synonym_cls: type | None, entry: DescribedConfig) -> Any:
    """One described config; its synonyms when ``synonym_cls`` is given. A sensitive
    config's values are never shown."""

    def shown(value: str | None) -> str | None:
        return None if entry.sensitive else value

    synonyms = ()
    if synonym_cls is not None:
        synonyms = tuple(
            build(synonym_cls, name=s.name, value=shown(s.value), source=s.source)
            for s in entry.synonyms
        )
    return build(
        config_cls,
        name=entry.name,
        value=shown(entry.value),
        read_only=entry.read_only,
        config_source=entry.source,
        is_default=entry.source == DEFAULT_CONFIG,  # v0
        is_sensitive=entry.sensitive,
        synonyms=synonyms,
        config_type=CONFIG_TYPES[entry.kind],
        documentation=None,
    )


def _resource_result(result_cls: type, resource: Any, outcome: ErrorOutcome, **more: Any) -> Any:
    return build(
        result_cls,
        **outcome.fields,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        **more,
    )


def _broker_layer(ctx: RequestContext, resource_name: str) -> dict[str, Any]:
    """The runtime settings a BROKER resource names: this broker's, or the cluster's ("")."""
    if resource_name == dynamic_configs.CLUSTER_DEFAULT:
        return ctx.broker.config.dynamic_default
    if resource_name == str(ctx.broker.node_id):
        return ctx.broker.config.dynamic_broker
    raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id {resource_name!r}")


def _alter(ctx: RequestContext, request: Any, compute: Any) -> Any:
    cls, result_cls = ctx.response_classes("responses")
    results = []
    for resource in request.resources:
        with ErrorOutcome() as outcome:
            rules.config_resource_denial(
                ctx, rules.ALTER_CONFIGS, resource.resource_type, resource.resource_name
            )
            if resource.resource_type == RESOURCE_BROKER:
                _alter_broker(ctx, resource, compute, request.validate_only)
            elif resource.resource_type == RESOURCE_TOPIC:
                topic = ctx.broker.logs.get_topic(resource.resource_name)
                current = {name: render_value(v) for name, v in topic.config.overrides.items()}
                overrides = validate_topic_configs(
                    compute(current, resource.configs, TOPIC_CONFIGS, "topic")
                )
                if not request.validate_only:
                    ctx.broker.logs.set_topic_configs(topic.name, overrides)
            else:
                raise KafkaError(ErrorCode.invalid_request, "unsupported resource type")
        results.append(_resource_result(result_cls, resource, outcome))
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(results))


def _alter_broker(ctx: RequestContext, resource: Any, compute: Any, validate_only: bool) -> None:
    layer = _broker_layer(ctx, resource.resource_name)
    current = {name: render_value(value) for name, value in layer.items()}
    try:
        wanted = compute(current, resource.configs, BROKER_CONFIGS, "broker")
    except KafkaError as error:
        raise KafkaError(ErrorCode.invalid_request, error.message) from None
    typed = validate_dynamic_broker_configs(wanted)
    if validate_only:
        return
    previous = dict(layer)
    layer.clear()
    layer.update(typed)
    try:
        dynamic_configs.save(ctx.broker.data_dir, ctx.broker.config)
    except OSError as error:
        layer.clear()
        layer.update(previous)
        raise KafkaError(ErrorCode.kafka_storage_error, f"cannot save: {error}") from None


def _not_null(entry: Any) -> None:
    if entry.value is None:  # Kafka refuses the request before it looks at the config
        raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {entry.name}")


@handles(33, 0, 2)
async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    def replace_all(current: dict, entries: Any, known: dict, kind: str) -> dict[str, Any]:
        for entry in entries:
            _not_null(entry)
        return {entry.name: entry.value for entry in entries}

    return _alter(ctx, request, replace_all)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    def apply_operations(current: dict, entries: Any, known: dict, kind: str) -> dict[str, Any]:
        values = dict(current)
        names = [entry.name for entry in entries]
        if len(set(names)) != len(names):
            raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
        for entry in entries:
            if entry.config_operation != OP_DELETE:
                _not_null(entry)
            key = known.get(entry.name)
            if key is None:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Unknown {kind} config name: {entry.name}"
                )
            operation = entry.config_operation
            if operation == OP_SET:
                values[entry.name] = entry.value
            elif operation == OP_DELETE:
                values.pop(entry.name, None)
            elif operation in (OP_APPEND, OP_SUBTRACT):
                if key.kind != "list":
                    raise KafkaError(
                        ErrorCode.invalid_config,
                        f"Config value append is not allowed for config key: {entry.name}",
                    )
                items = values.get(entry.name, render_value(key.default))
                now = [v for v in str(items).split(",") if v]
                given = [v.strip() for v in (entry.value or "").split(",") if v.strip()]
                if operation == OP_APPEND:
                    now += [v for v in given if v not in now]
                else:
                    now = [v for v in now if v not in given]
                values[entry.name] = ",".join(now)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"unknown operation {operation}")
        return values

    return _alter(ctx, request, apply_operations)
