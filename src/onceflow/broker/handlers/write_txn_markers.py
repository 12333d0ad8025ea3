"""WriteTxnMarkers v0-1 (API 27): write COMMIT/ABORT markers ending producers' transactions.

Kafka's transaction coordinators send it to partition leaders; ``kafka-transactions
abort`` and ``onceflow transactions abort`` send it to end a hanging transaction. Each
marker goes through ``MarkerWriter`` (``coordinator/txn_markers.py``), the path onceflow's
own coordinator uses, so producer state, the aborted-transactions index, the last stable
offset and pending offset commits move exactly as for a coordinator's marker. A partition
answers once its marker is durable and settled.

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
from onceflow.coordinator.txn_markers import Marker
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class MarkerWrite:
    """One marker on one partition: its error, or the wait for it to be settled."""

    producer_id: int
    topic: str
    partition: int
    code: ErrorCode = ErrorCode.none
    settled: asyncio.Future[None] | None = None


@handles(27, 0, 1)
async def write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    writes = [
        _append(ctx, marker, topic.name, partition)
        for marker in request.markers
        for topic in marker.topics
        for partition in topic.partition_indexes
    ]
    return Deferred(_answer_when_settled(ctx, writes))


def _append(ctx: RequestContext, marker: Any, topic: str, partition: int) -> MarkerWrite:
    write = MarkerWrite(marker.producer_id, topic, partition)
    try:
        rules.require_cluster_action_or_alter(ctx)
        write.settled = ctx.broker.transactions.markers.append(
            Marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.transaction_result,
                marker.coordinator_epoch,
            ),
            topic,
            partition,
        )
    except KafkaError as error:
        write.code = error.code
    return write


async def _answer_when_settled(ctx: RequestContext, writes: list[MarkerWrite]) -> Any:
    for write in writes:
        if write.settled is None:
            continue
        try:
            await write.settled
        except KafkaError as error:
            write.code = error.code
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
