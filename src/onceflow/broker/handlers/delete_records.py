"""DeleteRecords v0-2 (API 21): move a partition's log start offset forward."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import build, element
from onceflow.protocol.errors import ErrorCode, KafkaError


@handles(21, 0, 2)
async def delete_records(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    topic_cls = element(cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    topics = []
    denied = rules.denied_topics(ctx, rules.DELETE, (topic.name for topic in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            code, low_watermark = ErrorCode.none, -1
            try:
                rules.check(denied, topic.name)
                partition = ctx.broker.logs.partition(topic.name, wanted.partition_index)
                low_watermark = partition.delete_records_before(wanted.offset)
            except KafkaError as error:
                code = error.code
            partitions.append(
                build(
                    partition_cls,
                    partition_index=wanted.partition_index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=datetime.timedelta(0), topics=tuple(topics))
