"""CreateTopics v0-7 (API 19), DeleteTopics v0-6 (API 20), CreatePartitions v0-3 (API 37)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, TypeVar

from onceflow.broker.config_description import describe_topic_configs
from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build, element, field_names
from onceflow.protocol.errors import ErrorCode, ErrorOutcome, KafkaError

T = TypeVar("T")


def _each_once(items: Iterable[T], key: Callable[[T], Hashable]) -> Iterator[tuple[T, bool]]:
    """The first item of each key, and whether the request lists that key more than once:
    Kafka answers each key once, INVALID_REQUEST when it is repeated."""
    listed = list(items)
    counts = Counter(key(item) for item in listed)
    answered: set[Hashable] = set()
    for item in listed:
        if (name := key(item)) not in answered:
            answered.add(name)
            yield item, counts[name] > 1


def _name(topic: Any) -> str | None:
    return topic.name


def _duplicate_error(name: Any) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, f"the request lists {name} more than once")


def _check_assignments(assignments: Any, node_id: int) -> None:
    for assignment in assignments or ():
        if list(assignment.broker_ids) != [node_id]:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"replicas must be exactly [{node_id}] on a single-broker cluster",
            )


@handles(19, 0, 7)
async def create_topics(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    cls, result_cls = ctx.response_classes("topics")
    results = []
    denied = rules.create_topic_denials(ctx, [wanted.name for wanted in request.topics])
    for wanted, repeated in _each_once(request.topics, _name):
        partitions, replication = wanted.num_partitions, wanted.replication_factor
        topic = None
        with ErrorOutcome() as outcome:
            if repeated:
                raise _duplicate_error(wanted.name)
            rules.check(denied, wanted.name)
            if wanted.assignments:
                if partitions != -1 or replication != -1:
                    raise KafkaError(
                        ErrorCode.invalid_request,
                        "give either assignments or partitions and replication factor",
                    )
                indexes = sorted(assignment.partition_index for assignment in wanted.assignments)
                if indexes != list(range(len(indexes))):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        "partitions should be a consecutive 0-based integer sequence",
                    )
                _check_assignments(wanted.assignments, ctx.broker.node_id)
                partitions, replication = len(wanted.assignments), 1
            configs = {config.name: config.value for config in wanted.configs}
            if getattr(request, "validate_only", False):  # v1+
                logs.check_new_topic(wanted.name, partitions, replication, configs)
            else:
                topic = logs.create_topic(wanted.name, partitions, replication, configs)
            if partitions == -1:
                partitions = ctx.broker.config["num.partitions"]
            if replication == -1:
                replication = ctx.broker.config["default.replication.factor"]
        if outcome.code != ErrorCode.none:
            partitions = replication = -1
        config_cls = (
            element(result_cls, "configs") if "configs" in field_names(result_cls) else None
        )
        described = ()
        if topic is not None and not rules.allowed(
            ctx, rules.DESCRIBE_CONFIGS, rules.TOPIC, topic.name
        ):
            config_cls = None  # created, but its configs are not the principal's to see
        if topic is not None and config_cls is not None:
            described = tuple(
                build(
                    config_cls,
                    name=entry.name,
                    value=entry.value,
                    read_only=False,
                    config_source=entry.source,
                    is_sensitive=False,
                )
                for entry in describe_topic_configs(topic.config, None)
            )
        results.append(
            build(
                result_cls,
                name=wanted.name,
                topic_id=topic.topic_id if topic else None,
                **outcome.fields,
                topic_config_error_code=ErrorCode.none,
                num_partitions=partitions,
                replication_factor=replication,
                configs=described,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(results))


def _delete_key(item: Any) -> Any:
    """A topic to delete: a name (v0-5), or a name or else a topic id (v6)."""
    return item if isinstance(item, str) else (item.name or item.topic_id)


@handles(20, 0, 6)
async def delete_topics(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    cls, result_cls = ctx.response_classes("responses")
    results = []
    wanted = request.topics if hasattr(request, "topics") else request.topic_names
    for item, repeated in _each_once(wanted, _delete_key):
        name = item if isinstance(item, str) else item.name
        topic_id = None if isinstance(item, str) else item.topic_id
        with ErrorOutcome() as outcome:
            if repeated:
                raise _duplicate_error(_delete_key(item))
            if name is None and topic_id is not None:
                matches = [t.name for t in logs.topics.values() if t.topic_id == topic_id]
                if not matches:
                    raise KafkaError(ErrorCode.unknown_topic_id, f"unknown topic id {topic_id}")
                name = matches[0]
            if name is None:
                raise KafkaError(ErrorCode.invalid_request, "neither topic name nor id given")
            rules.require(ctx, rules.DELETE, rules.TOPIC, name)
            topic = logs.get_topic(name)
            if topic.internal:
                raise KafkaError(
                    ErrorCode.invalid_request, f"internal topic {name} cannot be deleted"
                )
            topic_id = topic.topic_id
            logs.delete_topic(name)
            ctx.broker.metrics.forget_topic(name)
        results.append(build(result_cls, name=name, topic_id=topic_id, **outcome.fields))
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(results))


@handles(37, 0, 3)
async def create_partitions(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    cls, result_cls = ctx.response_classes("results")
    results = []
    for wanted, repeated in _each_once(request.topics, _name):
        with ErrorOutcome() as outcome:
            if repeated:
                raise _duplicate_error(wanted.name)
            rules.require(ctx, rules.ALTER, rules.TOPIC, wanted.name)
            topic = logs.get_topic(wanted.name)
            _check_assignments(wanted.assignments, ctx.broker.node_id)
            if wanted.count <= len(topic.partitions):
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {len(topic.partitions)} partitions, which is higher "
                    f"than or equal to the requested {wanted.count}.",
                )
            added = wanted.count - len(topic.partitions)
            if wanted.assignments is not None and len(wanted.assignments) != added:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {added} but "
                    f"{len(wanted.assignments)} assignments provided.",
                )
            if not request.validate_only:
                logs.add_partitions(wanted.name, wanted.count)
        results.append(build(result_cls, name=wanted.name, **outcome.fields))
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))
