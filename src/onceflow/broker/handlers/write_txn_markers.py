"""WriteTxnMarkers v0-1 (API 27): write COMMIT/ABORT markers ending producers' transactions.

Kafka's transaction coordinators send it to partition leaders; ``kafka-transactions
abort`` and ``onceflow transactions abort`` send it to end a hanging transaction. Each
marker goes through ``PartitionLog.append_marker``, the path onceflow's own coordinator
uses, so producer state, the aborted-transactions index and the last stable offset move
exactly as for a coordinator's marker. A partition answers once its marker is durable.

v0 is gone from Kafka 4 (KIP-896); v2 carries KIP-890 part 2's transaction version,
which this broker does not speak (it does not advertise AddPartitionsToTxn v4+ either).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from onceflow.broker.context import Deferred, RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.log.batch import CONTROL_ABORT, CONTROL_COMMIT
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class MarkerWrite:
    """One marker on one partition: its error, or the wait for it to be durable."""

    producer_id: int
    committed: bool
    topic: str
    partition: int
    code: ErrorCode = ErrorCode.none
    durable: asyncio.Future[None] | None = None


@handles(27, 0, 1)
async def write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    writes = [
        _append(ctx, marker, topic.name, partition)
        for marker in request.markers
        for topic in marker.topics
        for partition in topic.partition_indexes
    ]
    return Deferred(_answer_when_durable(ctx, writes))


def _append(ctx: RequestContext, marker: Any, topic: str, partition: int) -> MarkerWrite:
    write = MarkerWrite(marker.producer_id, marker.transaction_result, topic, partition)
    try:
        rules.require_cluster_action_or_alter(ctx)
        log = ctx.broker.logs.partition(topic, partition)
        log.append_marker(
            marker.producer_id,
            marker.producer_epoch,
            CONTROL_COMMIT if marker.transaction_result else CONTROL_ABORT,
            marker.coordinator_epoch,
        )
        write.durable = log.wait_durable(log.log_end_offset)
    except KafkaError as error:
        write.code = error.code
    return write


async def _answer_when_durable(ctx: RequestContext, writes: list[MarkerWrite]) -> Any:
    for write in writes:
        if write.durable is None:
            continue
        try:
            await write.durable
        except KafkaError as error:
            write.code = error.code
            continue
        if write.topic == CONSUMER_OFFSETS_TOPIC:
            # Only a durable marker settles a transaction's offset commits, as in Kafka.
            ctx.broker.groups.offsets.complete_transaction(
                write.producer_id, write.committed, write.partition
            )
    return _response(ctx.response_class, writes)


def _response(cls: type, writes: list[MarkerWrite]) -> Any:
    """One result per producer id, one per partition of it (a later marker's error for
    the same partition wins), as Kafka answers."""
    marker_cls = element(cls, "markers")
    topic_cls = element(marker_cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    by_producer: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for write in writes:
        topics = by_producer.setdefault(write.producer_id, {})
        topics.setdefault(write.topic, {})[write.partition] = write.code
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        markers=tuple(
            marker_cls(
                producer_id=producer_id,
                topics=tuple(
                    topic_cls(
                        name=name,
                        partitions=tuple(
                            partition_cls(partition_index=number, error_code=code)
                            for number, code in partitions.items()
                        ),
                    )
                    for name, partitions in topics.items()
                ),
            )
            for producer_id, topics in by_producer.items()
        ),
    )
