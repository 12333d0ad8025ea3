"""Fetch v4-17 (API 1): stored batches up to the high watermark (or the LSO for read_committed).

From v13 on topics are named by their id (KIP-516); an unknown id answers UNKNOWN_TOPIC_ID.

Long-polls until ``min_bytes`` are available or ``max_wait`` passes. Fetch sessions
(KIP-227) are not kept: every response carries session id 0, which makes clients send full
fetch requests.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import ErrorCode, KafkaError

READ_COMMITTED = 1


@handles(1, 4, 17)
async def fetch(ctx: RequestContext, request: Any) -> Any:
    deadline = time.monotonic() + request.max_wait.total_seconds()
    names = [_topic_name(ctx.broker.logs, topic) for topic in request.topics]
    while True:
        response, total_bytes, partitions = _read_all(ctx, request, names)
        remaining = deadline - time.monotonic()
        if total_bytes >= request.min_bytes or remaining <= 0 or not partitions:
            _count(ctx, response, [name for name, _ in names])
            return response
        waiters = [partition.new_data.waiter() for partition in partitions]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for partition, waiter in zip(partitions, waiters, strict=True):
                partition.new_data.discard(waiter)


def _read_all(
    ctx: RequestContext, request: Any, names: list[tuple[str, KafkaError | None]]
) -> tuple[Any, int, list[PartitionLog]]:
    logs = ctx.broker.logs
    cls = ctx.response_class
    topic_cls = element(cls, "responses")
    partition_cls = element(topic_cls, "partitions")
    aborted_cls = element(partition_cls, "aborted_transactions")
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    budget = getattr(request, "max_bytes", 2**31 - 1)
    total = 0
    watched: list[PartitionLog] = []
    topics = []
    denied = rules.fetch_denials(ctx, request, [name for name, error in names if error is None])
    for topic, (name, id_error) in zip(request.topics, names, strict=True):
        partitions = []
        for wanted in topic.partitions:
            code = ErrorCode.none
            records: bytes | None = None
            high_watermark = stable = start = -1
            aborted = None
            try:
                if id_error is not None:
                    raise id_error
                rules.check(denied, name)
                partition = logs.partition(name, wanted.partition)
                high_watermark = partition.high_watermark
                start = partition.log_start_offset
                stable = stable_offset(partition.last_stable_offset, start)
                watched.append(partition)
                limit = min(wanted.partition_max_bytes, budget - total)
                if limit > 0 or total == 0:
                    result = partition.read(wanted.fetch_offset, max(limit, 1), read_committed)
                    records = result.records
                    total += len(records)
                    high_watermark = result.high_watermark
                    start = result.log_start_offset
                    stable = stable_offset(result.last_stable_offset, start)
                    if result.aborted is not None:
                        aborted = tuple(
                            aborted_cls(producer_id=txn.producer_id, first_offset=txn.first_offset)
                            for txn in result.aborted
                        )
            except KafkaError as error:
                # Kafka answers a partition error without watermarks; its aborted list is
                # null for an offset out of range (found reading the log), else empty.
                code = error.code
                high_watermark = stable = start = -1
                records = None
                aborted = None if code == ErrorCode.offset_out_of_range else ()
            if read_committed and aborted is None and code == ErrorCode.none:
                aborted = ()
            partitions.append(
                build(
                    partition_cls,
                    partition_index=wanted.partition,
                    error_code=code,
                    high_watermark=high_watermark,
                    last_stable_offset=stable,
                    log_start_offset=start,
                    aborted_transactions=aborted if read_committed or code else None,
                    preferred_read_replica=-1,
                    records=records if records is not None else b"",
                )
            )
        topics.append(
            build(
                topic_cls,
                topic=name,
                topic_id=getattr(topic, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    response = build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(topics),
    )
    return response, total, watched


def _count(ctx: RequestContext, response: Any, names: list[str]) -> None:
    """Kafka's BytesOutPerSec and (Failed)FetchRequestsPerSec of each topic answered."""
    metrics, known = ctx.broker.metrics, ctx.broker.logs.topics
    for topic, name in zip(response.responses, names, strict=True):
        failed = any(p.error_code for p in topic.partitions)
        size = sum(len(p.records) for p in topic.partitions)
        metrics.fetched(name if name in known else None, size, failed)


def stable_offset(last_stable_offset: int, log_start_offset: int) -> int:
    """The LSO as Kafka reports it: never below the log start offset (records deleted
    past an open transaction's first offset move Kafka's first unstable offset up)."""
    return max(last_stable_offset, log_start_offset)


def _topic_name(logs: Any, topic: Any) -> tuple[str, KafkaError | None]:
    """The name a fetched topic stands for (v13+ give only its id)."""
    if hasattr(topic, "topic"):
        return topic.topic, None
    try:
        return logs.topic_by_id(topic.topic_id).name, None
    except KafkaError as error:
        return "", error
