"""ListOffsets v0-9 (API 2): earliest, latest (the LSO under read_committed), max timestamp (v7+),
earliest local (v8+, the log start offset: there is no tiered storage), latest tiered (v9+,
-1: nothing is tiered), by time.

v0 (dropped by Kafka 4.0, still sent by sarama-based tools such as Burrow) answers a list
of segment start offsets, as Kafka 3.x does.
"""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.handlers.fetch import stable_offset
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorCode, ErrorOutcome, KafkaError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The first version that may ask for each special timestamp; an older version, or a negative
# timestamp not listed, is answered UNSUPPORTED_VERSION for that partition as Kafka does.
SPECIAL_TIMESTAMP_SINCE = {
    LATEST: 1,
    EARLIEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
}
READ_COMMITTED = 1


CONSUMER_REPLICA_ID = -1


@handles(2, 0, 9)
async def list_offsets(ctx: RequestContext, request: Any) -> Any:
    if ctx.version == 0:
        return _legacy_list_offsets(ctx, request)
    logs = ctx.broker.logs
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    denied = rules.denied_topics(ctx, rules.DESCRIBE, (topic.name for topic in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            offset, timestamp, leader_epoch = -1, -1, 0
            with ErrorOutcome() as outcome:
                rules.check(denied, topic.name)
                if wanted.timestamp < 0 and ctx.version < SPECIAL_TIMESTAMP_SINCE.get(
                    wanted.timestamp, ctx.version + 1
                ):
                    raise KafkaError(
                        ErrorCode.unsupported_version,
                        f"timestamp {wanted.timestamp} needs a newer ListOffsets version",
                    )
                partition = logs.partition(topic.name, wanted.partition_index)
                partition.require_online()
                visible = (
                    stable_offset(partition.last_stable_offset, partition.log_start_offset)
                    if read_committed
                    else partition.high_watermark
                )
                if wanted.timestamp == LATEST:
                    offset = visible
                elif wanted.timestamp in (EARLIEST, EARLIEST_LOCAL):
                    offset = partition.log_start_offset
                elif wanted.timestamp == LATEST_TIERED:
                    leader_epoch = -1
                else:
                    if wanted.timestamp == MAX_TIMESTAMP:
                        found = partition.reads.offset_of_max_timestamp()
                    else:
                        found = partition.reads.offset_for_timestamp(wanted.timestamp)
                    if found is not None and 0 <= found[0] < visible:
                        offset, timestamp = found
            partitions.append(
                build(
                    partition_cls,
                    partition_index=wanted.partition_index,
                    error_code=outcome.code,
                    timestamp=timestamp,
                    offset=offset,
                    # Kafka: no epoch when no offset is found (or the partition failed).
                    leader_epoch=leader_epoch if offset >= 0 else -1,
                )
            )
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _legacy_list_offsets(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            offsets = []
            with ErrorOutcome() as outcome:
                partition = ctx.broker.logs.partition(topic.name, wanted.partition_index)
                partition.require_online()
                offsets = partition.reads.legacy_offsets_before(
                    wanted.timestamp, wanted.max_num_offsets
                )
                high_watermark = partition.high_watermark
                if request.replica_id == CONSUMER_REPLICA_ID and any(
                    offset > high_watermark for offset in offsets
                ):
                    offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
            partitions.append(
                partition_cls(
                    partition_index=wanted.partition_index,
                    error_code=outcome.code,
                    old_style_offsets=tuple(offsets),
                )
            )
        topics.append(topic_cls(name=topic.name, partitions=tuple(partitions)))
    return cls(topics=tuple(topics))
