"""How ``onceflow log dump`` shows the records of the coordinators' internal topics.

* ``decode_consumer_offsets``: ``__consumer_offsets`` records, which onceflow writes in
  Kafka's own binary schemas, shown as Kafka's ``--offsets-decoder`` shows them:
  ``{"type": key version, "data": ...}`` and ``{"version": value version, "data": ...}``.
* ``decode_transaction_log``: ``__transaction_state`` records. onceflow keys them by the
  transactional id and stores JSON (not Kafka's binary TransactionLogValue), so there is no
  schema version to show; the fields are renamed to the names Kafka's
  ``--transaction-log-decoder`` prints.
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Callable
from typing import Any

from onceflow.coordinator.group_records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    RecordFormatError,
    assigned_partitions,
    parse_group_value,
    parse_key,
    parse_offset_value,
    subscribed_topics,
)
from onceflow.coordinator.transaction_metadata import TransactionMetadata
from onceflow.log.record_decoders import RecordDecoder, compact_json

TOMBSTONE = "<DELETE>"  # Kafka's word for a record with a null value in these topics
CONSUMER_PROTOCOL = "consumer"


# -- __consumer_offsets -----------------------------------------------------------------


Decoded = tuple[str | None, str | None]


def _keyed(decode: Callable[[int, bytes, bytes | None], Decoded]) -> RecordDecoder:
    """A decoder for records that must have a key: without one, Kafka's error line."""

    @functools.wraps(decode)
    def decoder(offset: int, key: bytes | None, value: bytes | None) -> Decoded:
        if key is None:
            return f"Error at offset {offset}, skipping. The record has no key.", None
        return decode(offset, key, value)

    return decoder


@_keyed
def decode_consumer_offsets(offset: int, key: bytes, value: bytes | None) -> Decoded:
    try:
        parsed_key = parse_key(key)
        key_version = struct.unpack_from(">h", key)[0]
        key_text = compact_json({"type": str(key_version), "data": offsets_key_fields(parsed_key)})
        if value is None:
            return key_text, TOMBSTONE
        value_version = struct.unpack_from(">h", value)[0]
        if isinstance(parsed_key, OffsetKey):
            fields = offset_commit_fields(value)
        else:
            fields = group_metadata_fields(parse_group_value(value))
        return key_text, compact_json({"version": str(value_version), "data": fields})
    except (RecordFormatError, UnicodeDecodeError, struct.error) as error:
        return f"Error at offset {offset}, skipping. {error}", None


def offsets_key_fields(key: OffsetKey | GroupKey) -> dict[str, Any]:
    if isinstance(key, OffsetKey):
        return {"group": key.group_id, "topic": key.topic, "partition": key.partition}
    return {"group": key.group_id}


def offset_commit_fields(value: bytes) -> dict[str, Any]:
    commit = parse_offset_value(value)
    return {
        "offset": commit.offset,
        "leaderEpoch": commit.leader_epoch,
        "metadata": commit.metadata,
        "commitTimestamp": commit.commit_timestamp,
    }


def group_metadata_fields(group: GroupValue) -> dict[str, Any]:
    consumer = group.protocol_type == CONSUMER_PROTOCOL
    return {
        "protocolType": group.protocol_type,
        "generation": group.generation_id,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "currentStateTimestamp": group.state_timestamp,
        "members": [member_fields(member, consumer) for member in group.members],
    }


def member_fields(member: MemberRecord, consumer_protocol: bool) -> dict[str, Any]:
    subscription: Any = base64.b64encode(member.subscription).decode()
    assignment: Any = base64.b64encode(member.assignment).decode()
    if consumer_protocol:  # decoded like Kafka's tool; the raw bytes when they do not parse
        topics = subscribed_topics(member.subscription)
        if topics is not None:
            subscription = {"topics": sorted(topics)}
        partitions = assigned_partitions(member.assignment)
        if partitions is not None:
            assignment = {
                "assignedPartitions": [
                    {"topic": topic, "partitions": numbers}
                    for topic, numbers in sorted(partitions.items())
                ]
            }
    return {
        "memberId": member.member_id,
        "groupInstanceId": member.group_instance_id,
        "clientId": member.client_id,
        "clientHost": member.client_host,
        "rebalanceTimeout": member.rebalance_timeout_ms,
        "sessionTimeout": member.session_timeout_ms,
        "subscription": subscription,
        "assignment": assignment,
    }


# -- __transaction_state ----------------------------------------------------------------


@_keyed
def decode_transaction_log(offset: int, key: bytes, value: bytes | None) -> Decoded:
    try:
        transactional_id = key.decode()
        key_text = compact_json({"transactionalId": transactional_id})
        if value is None:
            return key_text, TOMBSTONE
        metadata = TransactionMetadata.from_json(transactional_id, value)
    except (ValueError, KeyError, TypeError) as error:
        return f"Error at offset {offset}, skipping. {error!r}", None
    return key_text, compact_json(transaction_fields(metadata))


def transaction_fields(metadata: TransactionMetadata) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return {
        "producerId": metadata.producer_id,
        "producerEpoch": metadata.producer_epoch,
        "lastProducerEpoch": metadata.last_producer_epoch,
        "transactionTimeoutMs": metadata.timeout_ms,
        "transactionStatus": metadata.state.value,
        "transactionPartitions": [
            {"topic": topic, "partitionIds": partitions} for topic, partitions in by_topic.items()
        ],
        "transactionLastUpdateTimestampMs": metadata.update_ms,
        "transactionStartTimestampMs": metadata.start_ms,
    }
