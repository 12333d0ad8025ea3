"""Produce v3-12 (API 0): validate each partition's batch, append it, answer once it is durable.

From v12 on (transactions v2, KIP-890 part 2) a transactional batch adds its partition to
the transaction itself; older versions need AddPartitionsToTxn first."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import struct
import time
from typing import Any

from onceflow.broker.context import NO_RESPONSE, Deferred, RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.config import LONG_MAX
from onceflow.log.batch import HEADER_SIZE, LOG_OVERHEAD, validate_produce_records
from onceflow.log.record_index import record_entries
from onceflow.protocol.codec import NO_THROTTLE, build, element, field_names
from onceflow.protocol.errors import ErrorCode, ErrorOutcome, KafkaError

IMPLICIT_ADD_PARTITIONS = 12
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAGIC_AT = 16
# Errors Kafka answers without the partition's log start offset: found before the log
# append (request checks, size, CRC) or about the partition itself. An error the log
# append raises (sequence, epoch, record validation) carries it.
NO_LOG_START_OFFSET = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.corrupt_message,
        ErrorCode.kafka_storage_error,
    }
)


@handles(0, 3, 12)
async def produce(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    cls, topic_cls, partition_cls = ctx.response_classes("responses", "partition_responses")
    error_cls = (
        element(partition_cls, "record_errors")
        if "record_errors" in field_names(partition_cls)
        else None
    )
    acks = request.acks
    waits: list[Wait] = []
    topics = []
    denied = rules.produce_denials(ctx, request.transactional_id, request.topic_data)
    for topic_data in request.topic_data:
        partitions = []
        # a partition listed twice: Kafka keeps the last entry (its request is a map)
        for data in {data.index: data for data in topic_data.partition_data}.values():
            base_offset, append_time, start_offset = -1, -1, -1
            record_errors: list[tuple[int, str]] = []
            partition = None
            in_log = False  # the failure, if any, comes from validating or appending to the log
            with ErrorOutcome() as outcome:
                if acks not in (0, 1, -1):
                    raise KafkaError(ErrorCode.invalid_required_acks, f"acks={acks} is invalid")
                rules.check(denied, topic_data.name)
                if topic_data.name in INTERNAL_TOPICS:
                    raise KafkaError(
                        ErrorCode.invalid_topic_exception,
                        f"clients may not produce to the internal topic {topic_data.name}",
                    )
                partition = broker.logs.partition(topic_data.name, data.index)
                if data.records is None:
                    raise KafkaError(ErrorCode.corrupt_message, "null record set")
                _check_one_v2_batch(data.records)
                header = validate_produce_records(
                    data.records, partition.config["max.message.bytes"]
                )
                if header.is_transactional and request.transactional_id is None:
                    raise KafkaError(
                        ErrorCode.transactional_id_authorization_failed,
                        "a transactional batch needs the request's transactional id",
                    )
                in_log = True
                if header.has_producer_id and header.base_sequence < 0:
                    raise KafkaError(
                        ErrorCode.invalid_record,
                        f"invalid sequence number {header.base_sequence} for an idempotent batch",
                    )
                if partition.config.compacted:
                    record_errors = _keyless_records(data.records, header, partition.name)
                    if record_errors:
                        raise KafkaError(ErrorCode.invalid_record, _summary(record_errors))
                record_errors = _timestamp_errors(data.records, header, partition.config)
                if record_errors:
                    raise KafkaError(ErrorCode.invalid_timestamp, _summary(record_errors))
                in_log = False
                transactions_v2 = False
                if header.is_transactional or request.transactional_id is not None:
                    transactions = broker.transactions
                    implicit = ctx.version >= IMPLICIT_ADD_PARTITIONS
                    transactions_v2 = implicit and header.is_transactional
                    if implicit:
                        await transactions.add_produce_partition(
                            request.transactional_id, header, topic_data.name, data.index
                        )
                    if implicit or broker.config["transaction.partition.verification.enable"]:
                        transactions.verify_produce(
                            request.transactional_id, header, topic_data.name, data.index
                        )
                in_log = True
                result = partition.append_client_batch(data.records, header, transactions_v2)
                base_offset = result.base_offset
                append_time = result.log_append_time
                start_offset = partition.log_start_offset
                if acks != 0:  # one replica: acks=1 and acks=all both wait for the watermark
                    wait = partition.wait_durable(result.last_offset + 1)
                    waits.append((len(topics), len(partitions), wait))
            if in_log and partition is not None and outcome.code not in NO_LOG_START_OFFSET:
                start_offset = partition.log_start_offset
            if outcome.code == ErrorCode.none:
                broker.metrics.produced(topic_data.name, header.records_count, len(data.records))
            else:
                broker.metrics.produce_failed(topic_data.name if partition else None)
            partitions.append(
                build(
                    partition_cls,
                    index=data.index,
                    **outcome.fields,
                    base_offset=base_offset,
                    log_append_time=datetime.datetime.fromtimestamp(
                        append_time / 1000, datetime.UTC
                    )
                    if append_time >= 0
                    else None,
                    log_start_offset=start_offset,
                    record_errors=tuple(
                        build(error_cls, batch_index=index, batch_index_error_message=text)
                        for index, text in record_errors
                        if error_cls is not None
                    ),
                )
            )
        topics.append(build(topic_cls, name=topic_data.name, partition_responses=tuple(partitions)))
    response = build(cls, responses=tuple(topics), throttle_time=NO_THROTTLE)
    if acks == 0:
        # No answer to carry an error: Kafka closes the connection instead, so the
        # producer learns of it (its next request fails and it reconnects).
        if any(p.error_code for topic in topics for p in topic.partition_responses):
            ctx.session.close_after_response = True
        return NO_RESPONSE
    if waits:
        return Deferred(_when_durable(waits, response, request.timeout.total_seconds()))
    return response


def _check_one_v2_batch(records: bytes) -> None:
    """Kafka's first check of a produce request's records: one whole v2 batch. An empty
    or cut record set, or a batch of another magic, is INVALID_RECORD there."""
    if len(records) < LOG_OVERHEAD:
        raise KafkaError(ErrorCode.invalid_record, "a produce request needs one record batch")
    (length,) = struct.unpack_from(">i", records, 8)
    if length >= HEADER_SIZE - LOG_OVERHEAD and LOG_OVERHEAD + length > len(records):
        raise KafkaError(ErrorCode.invalid_record, "the record batch is cut short")
    if len(records) > MAGIC_AT and records[MAGIC_AT] != 2:
        raise KafkaError(
            ErrorCode.invalid_record, f"record batch magic {records[MAGIC_AT]} is not 2"
        )


def _timestamp_errors(records: bytes, header: Any, config: Any) -> list[tuple[int, str]]:
    """Kafka's per-record errors for CreateTime timestamps outside
    ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` of now."""
    if config["message.timestamp.type"] != "CreateTime":
        return []
    now = int(time.time() * 1000)
    lower = now - config["message.timestamp.before.max.ms"]
    upper = now + config["message.timestamp.after.max.ms"]
    if lower <= 0 and upper >= LONG_MAX:
        # Kafka's defaults: every timestamp a record can carry is in range. Reading each
        # record's timestamp here cost a third of the broker's produce time (profile in
        # benchmarks/README.md).
        return []
    entries = record_entries(records, header)
    if entries is None:  # compressed with a codec not read here: the batch's bounds
        outside = [s for s in (header.base_timestamp, header.max_timestamp) if s >= 0]
        stamps = [(0, max(outside, key=lambda s: abs(s - now)))] if outside else []
    else:
        stamps = [(entry.index, entry.timestamp) for entry in entries]
    return [
        (
            index,
            f"Timestamp {stamp} of message with offset {header.base_offset + index} is "
            f"out of range. The timestamp should be within [{lower}, {upper}]",
        )
        for index, stamp in stamps
        if stamp >= 0 and not lower <= stamp <= upper
    ]


def _keyless_records(records: bytes, header: Any, partition: str) -> list[tuple[int, str]]:
    """Kafka's per-record errors for records without a key sent to a compacted topic."""
    return [
        (
            entry.index,
            f"Compacted topic cannot accept message without key in topic partition {partition}.",
        )
        for entry in record_entries(records, header) or ()
        if not entry.has_key
    ]


def _summary(record_errors: list[tuple[int, str]]) -> str:
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{text}')" for index, text in record_errors[:3]
    )
    return (
        f"One or more records have been rejected due to {len(record_errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]"
    )


Wait = tuple[int, int, "asyncio.Future[None]"]  # topic index, partition index, durable


def _when_durable(waits: list[Wait], response: Any, timeout: float) -> asyncio.Future[Any]:
    """A future for ``response`` once every wait is done, or the timed-out response.

    A partition whose append was cut before it became durable (a failed fsync) answers
    the error instead of its success. Plain callbacks rather than gather/wait_for tasks:
    the response is ready in the loop turn after the last fsync it waits for.
    """
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[Any] = loop.create_future()
    pending = len(waits)

    def one_done(_: asyncio.Future[None]) -> None:
        nonlocal pending
        pending -= 1
        if pending == 0 and not ready.done():
            timer.cancel()
            ready.set_result(_with_failures(response, waits))

    def timed_out() -> None:
        if not ready.done():
            ready.set_result(_patched(response, _timeouts(response)))

    timer = loop.call_later(max(timeout, 1.0), timed_out)
    for _, _, wait in waits:
        wait.add_done_callback(one_done)
    return ready


def _with_failures(response: Any, waits: list[Wait]) -> Any:
    failed = {}
    for topic, partition, wait in waits:
        error = wait.exception()
        if error is not None:
            code = error.code if isinstance(error, KafkaError) else ErrorCode.kafka_storage_error
            failed[(topic, partition)] = (code, str(error))
    return _patched(response, failed) if failed else response


def _timeouts(response: Any) -> dict[tuple[int, int], tuple[ErrorCode, str | None]]:
    return {
        (t, p): (ErrorCode.request_timed_out, None)
        for t, topic in enumerate(response.responses)
        for p, partition in enumerate(topic.partition_responses)
        if partition.error_code == ErrorCode.none
    }


def _patched(response: Any, errors: dict[tuple[int, int], tuple[ErrorCode, str | None]]) -> Any:
    """``response`` with the given partitions answering an error instead."""

    def partition_response(t: int, p: int, partition: Any) -> Any:
        if (t, p) not in errors:
            return partition
        code, message = errors[(t, p)]
        return dataclasses.replace(
            partition, error_code=code, error_message=message, base_offset=-1
        )

    return dataclasses.replace(
        response,
        responses=tuple(
            dataclasses.replace(
                topic,
                partition_responses=tuple(
                    partition_response(t, p, partition)
                    for p, partition in enumerate(topic.partition_responses)
                ),
            )
            for t, topic in enumerate(response.responses)
        ),
    )
