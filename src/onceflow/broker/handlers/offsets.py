"""OffsetCommit v0-9 (API 8), OffsetFetch v0-9 (API 9) (per-group and group-batched forms),
OffsetDelete v0 (API 47).

Version 0 of OffsetCommit and OffsetFetch kept offsets in ZooKeeper; a KRaft Kafka 3.9 answers
them UNSUPPORTED_VERSION for every partition, and so does this broker."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.partition_responses import partition_errors, topic_responses
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.coordinator.group_metadata import TopicPartition
from onceflow.coordinator.group_requests import OffsetCommitRequest, OffsetRequest
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import ErrorCode


def offsets_to_commit(
    ctx: RequestContext, request: Any, transactional_id: str | None = None
) -> tuple[dict[TopicPartition, ErrorCode], OffsetRequest]:
    """An OffsetCommit's or TxnOffsetCommit's (offset, leader epoch, metadata) per
    partition: those authorization refuses or that do not exist (with their error), and
    the rest."""
    offsets = {
        (topic.name, partition.partition_index): (
            partition.committed_offset,
            getattr(partition, "committed_leader_epoch", -1),
            partition.committed_metadata,
        )
        for topic in request.topics
        for partition in topic.partitions
    }
    denied = rules.group_then_topics(
        ctx,
        request.group_id,
        rules.READ,
        rules.READ,
        [topic.name for topic in request.topics],
        transactional_id,
    )
    refused = {key: denied[key[0]] for key in offsets if key[0] in denied}
    # Kafka answers partitions it does not know before it asks the coordinator anything
    for key in offsets:
        if key not in refused and not ctx.broker.logs.has_partition(key):
            refused[key] = ErrorCode.unknown_topic_or_partition
    return refused, {key: value for key, value in offsets.items() if key not in refused}


ZOOKEEPER_ONLY = 0  # the OffsetCommit and OffsetFetch version that needs ZooKeeper


@handles(8, 0, 9)
async def offset_commit(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    refused, offsets = offsets_to_commit(ctx, request)
    results = refused
    if offsets and ctx.version == ZOOKEEPER_ONLY:
        results = refused | dict.fromkeys(offsets, ErrorCode.unsupported_version)
    elif offsets:
        results = refused | await ctx.broker.groups.offsets.commit(
            OffsetCommitRequest(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id_or_member_epoch,
                offsets,
                ctx.version,
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=topic_responses(topic_cls, results, partition_errors(partition_cls)),
    )


def _fetch_topics(
    ctx: RequestContext, topic_cls: type, group_id: str, topics: Any, require_stable: bool
) -> tuple:
    partition_cls = element(topic_cls, "partitions")
    wanted = None
    if topics is not None:
        wanted = [
            (topic.name, partition)
            for topic in topics
            for partition in getattr(topic, "partition_indexes", ())
        ]
    answers = rules.offsets_to_show(
        ctx, ctx.broker.groups.offsets.fetch(group_id, wanted, require_stable), topics is None
    )

    def partition_response(partition: int, answer: tuple[int, int, str, ErrorCode]) -> Any:
        offset, epoch, metadata, code = answer
        return build(
            partition_cls,
            partition_index=partition,
            committed_offset=offset,
            committed_leader_epoch=epoch,
            metadata=metadata,
            error_code=code,
        )

    by_partition = {tp: (offset, epoch, meta, code) for tp, offset, epoch, meta, code in answers}
    return topic_responses(topic_cls, by_partition, partition_response)


@handles(9, 0, 9)
async def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= 8:
        group_cls = element(cls, "groups")
        topic_cls = element(group_cls, "topics")
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            groups=tuple(
                group_cls(
                    group_id=group.group_id,
                    topics=_fetch_topics(
                        ctx, topic_cls, group.group_id, group.topics, require_stable
                    ),
                    error_code=ErrorCode.none,
                )
                if rules.allowed(ctx, rules.DESCRIBE, rules.GROUP, group.group_id)
                else group_cls(
                    group_id=group.group_id,
                    topics=(),
                    error_code=ErrorCode.group_authorization_failed,
                )
                for group in request.groups
            ),
        )
    topic_cls = element(cls, "topics")
    rules.require(ctx, rules.DESCRIBE, rules.GROUP, request.group_id)
    if ctx.version == ZOOKEEPER_ONLY:
        unsupported = {
            (topic.name, partition): ErrorCode.unsupported_version
            for topic in request.topics
            for partition in topic.partition_indexes
        }
        partition_cls = element(topic_cls, "partitions")
        return build(
            cls,
            topics=topic_responses(
                topic_cls,
                unsupported,
                lambda partition, code: build(
                    partition_cls,
                    partition_index=partition,
                    committed_offset=-1,
                    metadata="",
                    error_code=code,
                ),
            ),
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=_fetch_topics(ctx, topic_cls, request.group_id, request.topics, require_stable),
        error_code=ErrorCode.none,
    )


@handles(47, 0, 0)
async def offset_delete(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    logs = ctx.broker.logs
    results: dict[tuple[str, int], ErrorCode] = {}
    known = []
    rules.require(ctx, rules.DELETE, rules.GROUP, request.group_id)
    denied = rules.denied_topics(ctx, rules.READ, (topic.name for topic in request.topics))
    for topic in request.topics:
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if topic.name in denied:
                results[key] = denied[topic.name]
            elif not logs.has_partition(key):
                results[key] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(key)
                results[key] = ErrorCode.none
    top, deleted = await ctx.broker.groups.offsets.delete(request.group_id, known)
    if top != ErrorCode.none:
        return build(cls, error_code=top, throttle_time=NO_THROTTLE, topics=())
    results.update(deleted)
    return build(
        cls,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=topic_responses(topic_cls, results, partition_errors(partition_cls)),
    )
