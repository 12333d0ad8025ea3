"""Metadata v0-12 (API 3): one broker (this one) leading every partition; optional
auto-creation; topics asked for by id (v10+) as well as by name. In v0 an empty topic list
asks for every topic (v1+ uses null for that).

A partition taken offline (damage on disk) keeps this broker as its leader, lists it in
``offline_replicas`` and has KAFKA_STORAGE_ERROR as its error. Kafka moves leadership
away from an offline log dir (LEADER_NOT_AVAILABLE and no leader when no other replica
exists); with no leader, clients send nothing and a consumer waits in silence. Kept as
leader, the broker answers their requests with the error that says what is wrong
(CORRUPT_MESSAGE to a fetch, KAFKA_STORAGE_ERROR to the rest), which they report.
"""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.handlers.cluster import cluster_fields
from onceflow.broker.operations import NOT_ASKED, TOPIC_OPERATIONS
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.log.manager import Topic
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import ErrorCode, KafkaError


def auto_create(ctx: RequestContext, name: str) -> Topic:
    """Create ``name`` with broker defaults if auto.create.topics.enable allows it."""
    logs = ctx.broker.logs
    topic = logs.topics.get(name)
    if topic is not None:
        return topic
    if not ctx.broker.config["auto.create.topics.enable"]:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name}")
    return logs.create_topic(name)


@handles(3, 0, 12)
async def metadata(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    allow_create = getattr(request, "allow_auto_topic_creation", True)

    def describe(name: str, topic: Topic | None, code: ErrorCode) -> Any:
        partitions = ()
        if topic is not None:
            partitions = tuple(
                _partition(partition_cls, broker.node_id, number, partition.offline is not None)
                for number, partition in enumerate(topic.partitions)
            )
        return build(
            topic_cls,
            error_code=code,
            name=name,
            topic_id=topic.topic_id if topic else None,
            is_internal=topic.internal if topic else False,
            partitions=partitions,
            topic_authorized_operations=rules.authorized_operations(
                ctx,
                rules.TOPIC,
                name,
                getattr(request, "include_topic_authorized_operations", False),
                TOPIC_OPERATIONS,
            )
            if topic is not None
            else NOT_ASKED,
        )

    topics = []
    if request.topics is None or (ctx.version == 0 and not request.topics):
        hidden = rules.hidden_topics(ctx, broker.logs.topics)
        topics = [
            describe(t.name, t, ErrorCode.none)
            for t in broker.logs.topics.values()
            if t.name not in hidden
        ]
    else:
        denied = rules.metadata_denials(ctx, request.topics, allow_create)
        for wanted in request.topics:
            name = wanted.name
            if name is None:  # v10+: asked for by topic id
                try:
                    topic = broker.logs.topic_by_id(getattr(wanted, "topic_id", None))
                    rules.require(ctx, rules.DESCRIBE, rules.TOPIC, topic.name)
                    topics.append(describe(topic.name, topic, ErrorCode.none))
                except KafkaError as error:
                    topics.append(_unknown_id(topic_cls, wanted.topic_id, error.code))
                continue
            try:
                rules.check(denied, name)
                topic = broker.logs.topics.get(name)
                if topic is None:
                    if not allow_create:
                        raise KafkaError(ErrorCode.unknown_topic_or_partition)
                    topic = auto_create(ctx, name)
                topics.append(describe(name, topic, ErrorCode.none))
            except KafkaError as error:
                topics.append(describe(name, None, error.code))
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        **cluster_fields(ctx, request, element(cls, "brokers"), "node_id"),
    )


def _partition(partition_cls: type, node_id: int, number: int, offline: bool) -> Any:
    """One partition of this broker, which leads it; offline: its replica is listed
    offline and KAFKA_STORAGE_ERROR is the error."""
    return build(
        partition_cls,
        error_code=ErrorCode.kafka_storage_error if offline else ErrorCode.none,
        partition_index=number,
        leader_id=node_id,
        leader_epoch=0,
        replica_nodes=(node_id,),
        isr_nodes=(node_id,),
        offline_replicas=(node_id,) if offline else (),
    )


def _unknown_id(topic_cls: type, topic_id: Any, code: ErrorCode) -> Any:
    return build(
        topic_cls,
        error_code=code,
        name=None,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=NOT_ASKED,
    )
