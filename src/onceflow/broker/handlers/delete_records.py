"""DeleteRecords v0-2 (API 21): move a partition's log start offset forward."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorOutcome


@handles(21, 0, 2)
async def delete_records(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    topics = []
    denied = rules.denied_topics(ctx, rules.DELETE, (topic.name for topic in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            low_watermark = -1
            with ErrorOutcome() as outcome:
                rules.check(denied, topic.name)
                partition = ctx.broker.logs.partition(topic.name, wanted.partition_index)
                low_watermark = partition.retention.delete_records_before(wanted.offset)
            partitions.append(
                build(
                    partition_cls,
                    partition_index=wanted.partition_index,
                    low_watermark=low_watermark,
                    error_code=outcome.code,
                )
            )
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
