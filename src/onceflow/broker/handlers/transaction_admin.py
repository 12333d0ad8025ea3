"""ListTransactions v0-1 (API 66), DescribeTransactions v0 (API 65), DescribeProducers v0 (API
61): finding hanging transactions."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorCode, ErrorOutcome


def from_millis(timestamp_ms: int) -> datetime.datetime:
    """A start time for the wire; -1 (no transaction open) as Kafka sends it."""
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)


def _or_minus_one(offset: int | None) -> int:
    return -1 if offset is None else offset


@handles(66, 0, 1)
async def list_transactions(ctx: RequestContext, request: Any) -> Any:
    cls, state_cls = ctx.response_classes("transaction_states")
    states = set(request.state_filters or ())
    producers = set(request.producer_id_filters or ())
    min_duration = getattr(request, "duration_filter", -1)
    now = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    known_states = {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
    listed = []
    for metadata in ctx.broker.transactions.listing():
        if states and metadata.state.value not in states:
            continue
        if not rules.allowed(
            ctx, rules.DESCRIBE, rules.TRANSACTIONAL_ID, metadata.transactional_id, False
        ):
            continue
        if producers and metadata.producer_id not in producers:
            continue
        if min_duration >= 0 and (metadata.start_ms < 0 or now - metadata.start_ms < min_duration):
            continue
        listed.append(
            state_cls(
                transactional_id=metadata.transactional_id,
                producer_id=metadata.producer_id,
                transaction_state=metadata.state.value,
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(sorted(states - known_states)),
        transaction_states=tuple(listed),
    )


@handles(65, 0, 0)
async def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    cls, state_cls, topic_cls = ctx.response_classes("transaction_states", "topics")
    described = []
    for transactional_id in request.transactional_ids:
        allowed = rules.allowed(ctx, rules.DESCRIBE, rules.TRANSACTIONAL_ID, transactional_id)
        metadata = ctx.broker.transactions.describe(transactional_id) if allowed else None
        if metadata is None:
            if not allowed:
                code = ErrorCode.transactional_id_authorization_failed
            elif not transactional_id:
                code = ErrorCode.invalid_request
            else:
                code = ErrorCode.transactional_id_not_found
            described.append(
                build(
                    state_cls,
                    error_code=code,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=from_millis(0),
                    producer_id=0,  # Kafka's error entries carry the fields' defaults
                    producer_epoch=0,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        hidden = rules.hidden_topics(ctx, {topic for topic, _ in metadata.partitions})
        for topic, partition in sorted(metadata.partitions):
            if topic not in hidden:
                by_topic.setdefault(topic, []).append(partition)
        described.append(
            build(
                state_cls,
                error_code=ErrorCode.none,
                transactional_id=transactional_id,
                transaction_state=metadata.state.value,
                transaction_timeout=datetime.timedelta(milliseconds=metadata.timeout_ms),
                transaction_start_time=from_millis(metadata.start_ms),
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                topics=tuple(
                    topic_cls(topic=topic, partitions=tuple(parts))
                    for topic, parts in by_topic.items()
                ),
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, transaction_states=tuple(described))


@handles(61, 0, 0)
async def describe_producers(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls, producer_cls = ctx.response_classes(
        "topics", "partitions", "active_producers"
    )
    topics = []
    denied = rules.denied_topics(ctx, rules.READ, (topic.name for topic in request.topics))
    for topic in request.topics:
        partitions = []
        for number in topic.partition_indexes:
            active = ()
            with ErrorOutcome() as outcome:
                rules.check(denied, topic.name)
                state = ctx.broker.logs.partition(topic.name, number).producers
                active = tuple(
                    producer_cls(
                        producer_id=entry.producer_id,
                        producer_epoch=entry.epoch,
                        last_sequence=entry.last_seq,
                        last_timestamp=entry.last_timestamp,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=_or_minus_one(
                            state.open_transaction(entry.producer_id)
                        ),
                    )
                    for entry in state.producers.values()
                )
            partitions.append(
                build(
                    partition_cls, partition_index=number, **outcome.fields, active_producers=active
                )
            )
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
