"""DescribeLogDirs v0-4 (API 35), AlterReplicaLogDirs v0-2 (API 34): the data directory is the
one log dir.

A partition taken offline by damage is not listed, and the directory's error is then
KAFKA_STORAGE_ERROR, as Kafka reports an offline log dir (which lists no partitions);
the partitions still served are listed with it.

Moving a replica to the directory it is in is done at once; any other path answers
LOG_DIR_NOT_FOUND, and a partition the broker does not host REPLICA_NOT_AVAILABLE, as
Kafka answers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.log.manager import Topic
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorCode


@handles(35, 0, 4)
async def describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.DESCRIBE, rules.CLUSTER)
    cls, result_cls, topic_cls, partition_cls = ctx.response_classes(
        "results", "topics", "partitions"
    )
    logs = ctx.broker.logs
    if request.topics is None:
        wanted = [(topic, range(len(topic.partitions))) for topic in logs.topics.values()]
    else:
        wanted = [
            (logs.topics[item.topic], item.partitions)
            for item in request.topics
            if item.topic in logs.topics
        ]
    topics = []
    offline = any(p.offline for topic in logs.topics.values() for p in topic.partitions)
    for topic, numbers in wanted:
        partitions = tuple(
            build(
                partition_cls,
                partition_index=number,
                partition_size=topic.partitions[number].size_bytes(),
                offset_lag=0,
                is_future_key=False,
            )
            for number in numbers
            if 0 <= number < len(topic.partitions) and not topic.partitions[number].offline
        )
        if partitions:
            topics.append(build(topic_cls, name=topic.name, partitions=partitions))
    disk = os.statvfs(ctx.broker.data_dir)
    result = build(
        result_cls,
        error_code=ErrorCode.kafka_storage_error if offline else ErrorCode.none,
        log_dir=str(_log_dir(ctx)),
        topics=tuple(topics),
        total_bytes=disk.f_blocks * disk.f_frsize,
        usable_bytes=disk.f_bavail * disk.f_frsize,
    )
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


def _log_dir(ctx: RequestContext) -> Path:
    return Path(ctx.broker.data_dir).resolve()


@handles(34, 0, 2)
async def alter_replica_log_dirs(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.ALTER, rules.CLUSTER)
    cls, topic_cls, partition_cls = ctx.response_classes("results", "partitions")
    results = []
    for directory in request.dirs:
        known = Path(directory.path).resolve() == _log_dir(ctx)
        for wanted in directory.topics:
            topic = ctx.broker.logs.topics.get(wanted.name)
            partitions = tuple(
                build(partition_cls, partition_index=number, error_code=_move(known, topic, number))
                for number in wanted.partitions
            )
            results.append(build(topic_cls, topic_name=wanted.name, partitions=partitions))
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _move(known_dir: bool, topic: Topic | None, number: int) -> ErrorCode:
    if not known_dir:
        return ErrorCode.log_dir_not_found
    if topic is None or not 0 <= number < len(topic.partitions):
        return ErrorCode.replica_not_available
    if topic.partitions[number].offline:
        return ErrorCode.kafka_storage_error
    return ErrorCode.none
