"""AddPartitionsToTxn v0-5 (API 24), AddOffsetsToTxn v0-4 (API 25), EndTxn v0-5 (API 26),
TxnOffsetCommit v0-5 (API 28) (the transaction APIs). EndTxn v5+ and TxnOffsetCommit v5+ are
transactions v2 (KIP-890 part 2): the epoch moves on with every EndTxn, and the group's offsets
join implicitly. AddPartitionsToTxn v4+ is the batched form a broker sends (CLUSTER_ACTION),
which may only verify that partitions are in the transaction (KIP-890 part 1)."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.handlers.offsets import offsets_to_commit
from onceflow.broker.partition_responses import partition_errors, topic_responses
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.coordinator.group_requests import TxnOffsetCommitRequest
from onceflow.coordinator.transaction_metadata import PREPARING
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorCode, KafkaError


class _Refused(Exception):
    """Every partition of a TxnOffsetCommit was refused by authorization."""


def for_version(ctx: RequestContext, code: ErrorCode, fenced_since: int = 2) -> ErrorCode:
    """Older request versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (KIP-588)."""
    if code == ErrorCode.producer_fenced and ctx.version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code


BATCHED_ADD_PARTITIONS = 4  # the first AddPartitionsToTxn version brokers send (KIP-890)


@handles(24, 0, 5)
async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= BATCHED_ADD_PARTITIONS:
        return await _add_partitions_batched(ctx, request)
    cls, topic_cls, partition_cls = ctx.response_classes(
        "results_by_topic_v3_and_below", "results_by_partition"
    )
    wanted = [
        (topic.name, partition)
        for topic in request.v3_and_below_topics
        for partition in topic.partitions
    ]
    transactional_id = request.v3_and_below_transactional_id
    try:
        results = rules.add_partitions_denials(ctx, transactional_id, wanted)
        results = results or await ctx.broker.transactions.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
    except KafkaError as error:
        results = dict.fromkeys(wanted, for_version(ctx, error.code))
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=topic_responses(
            topic_cls,
            results,
            partition_errors(partition_cls, "partition_error_code"),
            "results_by_partition",
        ),
    )


async def _add_partitions_batched(ctx: RequestContext, request: Any) -> Any:
    """Adds (or with verify_only, checks) the partitions of several transactions; only a
    broker may ask (CLUSTER_ACTION), so topics are not authorized one by one."""
    rules.require(ctx, rules.CLUSTER_ACTION, rules.CLUSTER)
    cls, result_cls, topic_cls, partition_cls = ctx.response_classes(
        "results_by_transaction", "topic_results", "results_by_partition"
    )
    answers = []
    for transaction in request.transactions:
        wanted = [
            (topic.name, partition)
            for topic in transaction.topics
            for partition in topic.partitions
        ]
        try:
            if transaction.verify_only:
                results = _verify_partitions(ctx, transaction, wanted)
            else:
                results = await ctx.broker.transactions.add_partitions(
                    transaction.transactional_id,
                    transaction.producer_id,
                    transaction.producer_epoch,
                    wanted,
                )
        except KafkaError as error:
            results = dict.fromkeys(wanted, error.code)
        answers.append(
            result_cls(
                transactional_id=transaction.transactional_id,
                topic_results=topic_responses(
                    topic_cls,
                    results,
                    partition_errors(partition_cls, "partition_error_code"),
                    "results_by_partition",
                ),
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(answers),
    )


def _verify_partitions(
    ctx: RequestContext, transaction: Any, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode]:
    """Kafka's verification: each partition already in the ongoing transaction, or
    TRANSACTION_ABORTABLE; the producer and state checked first."""
    if not transaction.transactional_id:
        raise KafkaError(ErrorCode.invalid_request, "transactional id is empty")
    metadata = ctx.broker.transactions.describe(transaction.transactional_id)
    if metadata is None or metadata.producer_id != transaction.producer_id:
        raise KafkaError(ErrorCode.invalid_producer_id_mapping, "unknown producer id")
    if metadata.producer_epoch != transaction.producer_epoch:
        raise KafkaError(ErrorCode.producer_fenced, "producer epoch was fenced")
    if metadata.state in PREPARING:
        raise KafkaError(ErrorCode.concurrent_transactions, "the transaction is ending")
    return {
        tp: ErrorCode.none if tp in metadata.partitions else ErrorCode.transaction_abortable
        for tp in wanted
    }


@handles(25, 0, 4)
async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.WRITE, rules.TRANSACTIONAL_ID, request.transactional_id)
    rules.require(ctx, rules.READ, rules.GROUP, request.group_id)
    try:
        code = await ctx.broker.transactions.add_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
        )
    except KafkaError as error:
        code = for_version(ctx, error.code)
    return build(ctx.response_class, throttle_time=NO_THROTTLE, error_code=code)


TRANSACTIONS_V2 = 5  # the first EndTxn and TxnOffsetCommit versions of KIP-890 part 2


@handles(26, 0, 5)
async def end_txn(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.WRITE, rules.TRANSACTIONAL_ID, request.transactional_id)
    code = ErrorCode.none
    producer_id, epoch = -1, -1
    try:
        producer_id, epoch = await ctx.broker.transactions.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            version_2=ctx.version >= TRANSACTIONS_V2,
        )
    except KafkaError as error:
        code = for_version(ctx, error.code)
    return build(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


@handles(28, 0, 5)
async def txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    cls, topic_cls, partition_cls = ctx.response_classes("topics", "partitions")
    refused, offsets = offsets_to_commit(ctx, request, request.transactional_id)
    try:
        if not offsets:
            raise _Refused
        if ctx.version >= TRANSACTIONS_V2:
            code = await ctx.broker.transactions.add_offsets(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
            )
            if code != ErrorCode.none:
                raise KafkaError(code)
        else:
            ctx.broker.transactions.check_offsets_added(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
            )
        results = await ctx.broker.groups.offsets.commit_transactional(
            TxnOffsetCommitRequest(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                getattr(request, "member_id", ""),
                getattr(request, "generation_id", -1),
                getattr(request, "group_instance_id", None),
                offsets,
            )
        )
    except KafkaError as error:
        # Kafka answers a wrong epoch here with INVALID_PRODUCER_EPOCH at every version
        code = error.code
        if code == ErrorCode.producer_fenced:
            code = ErrorCode.invalid_producer_epoch
        results = dict.fromkeys(offsets, code)
    except _Refused:
        results = {}
    results = refused | results
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=topic_responses(topic_cls, results, partition_errors(partition_cls)),
    )
