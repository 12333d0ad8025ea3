"""What a coordinator answers when its own log refuses a write."""

from __future__ import annotations

from onceflow.protocol.errors import ErrorCode, KafkaError


def as_coordinator_error(error: KafkaError) -> KafkaError:
    """Kafka's mapping: a storage error on the coordinator's log is NOT_COORDINATOR (the
    client finds the coordinator again and retries); a missing log partition is
    COORDINATOR_NOT_AVAILABLE."""
    if error.code == ErrorCode.kafka_storage_error:
        return KafkaError(ErrorCode.not_coordinator, error.message)
    if error.code == ErrorCode.unknown_topic_or_partition:
        return KafkaError(ErrorCode.coordinator_not_available, error.message)
    return error
