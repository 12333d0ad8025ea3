"""How a coordinator writes to its internal topic (``__consumer_offsets``,
``__transaction_state``): through the log's one durable append, with the log's errors
answered as Kafka's coordinators answer them.

The log handles a failed write or fsync itself (the write leaves no trace, a failed
fsync cuts the unsynced tail and fails the waiters); a coordinator only translates the
error for its clients and undoes its own in-memory change.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.log.batch import KeyValue
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

INTERNAL_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 104_857_600}


def as_coordinator_error(error: KafkaError) -> KafkaError:
    """Kafka's mapping: a storage error on the coordinator's log is NOT_COORDINATOR (the
    client finds the coordinator again and retries); a missing log partition is
    COORDINATOR_NOT_AVAILABLE."""
    if error.code == ErrorCode.kafka_storage_error:
        return KafkaError(ErrorCode.not_coordinator, error.message)
    if error.code == ErrorCode.unknown_topic_or_partition:
        return KafkaError(ErrorCode.coordinator_not_available, error.message)
    return error


@dataclass(frozen=True, slots=True)
class Appended:
    """Records written to a partition, not yet known durable."""

    partition: PartitionLog
    base_offset: int
    end_offset: int

    async def durable(self) -> None:
        """Resolves once the records are durable; raises the coordinator's error if the
        log cut them instead (a failed fsync)."""
        try:
            await self.partition.wait_durable(self.end_offset)
        except KafkaError as error:
            raise as_coordinator_error(error) from None


def append(
    partition: PartitionLog,
    records: list[KeyValue],
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> Appended:
    """Append now (a transactional batch with a producer id); durable later."""
    try:
        base = partition.append_records(records, producer_id, producer_epoch)
    except KafkaError as error:
        raise as_coordinator_error(error) from None
    return Appended(partition, base, base + len(records))


async def append_durably(partition: PartitionLog, records: list[KeyValue]) -> Appended:
    appended = append(partition, records)
    await appended.durable()
    return appended
