"""``__transaction_state``: where the transaction coordinator keeps each transactional id's
metadata (one JSON record per id, the newest wins, a tombstone forgets it), and the
coordinator epoch, bumped durably at every start, which fences the markers of an earlier
run of the coordinator.
"""

from __future__ import annotations

import logging
from pathlib import Path

from onceflow.clock import Clock
from onceflow.coordinator.internal_log import INTERNAL_TOPIC_CONFIG, Appended, append
from onceflow.coordinator.transaction_metadata import TransactionMetadata
from onceflow.log.batch import KeyValue, read_key_values
from onceflow.log.durability import write_atomically
from onceflow.log.manager import LogManager
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import KafkaError

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
COORDINATOR_EPOCH_FILE = "transaction_coordinator_epoch"


class TransactionLog:
    def __init__(self, logs: LogManager, data_dir: Path, clock: Clock) -> None:
        self._logs = logs
        self._data_dir = data_dir
        self._clock = clock
        self._partition: PartitionLog | None = None

    def open(self) -> dict[str, TransactionMetadata]:
        """Open (or create) the topic and replay it: every transactional id's metadata."""
        if TRANSACTION_STATE_TOPIC not in self._logs.topics:
            self._logs.create_topic(
                TRANSACTION_STATE_TOPIC, 1, 1, INTERNAL_TOPIC_CONFIG, internal=True
            )
        partition = self._partition = self._logs.partition(TRANSACTION_STATE_TOPIC, 0)
        if partition.offline:
            log.error(
                "%s is offline: transactions cannot be loaded (%s)",
                TRANSACTION_STATE_TOPIC,
                partition.offline,
            )
            return {}
        transactions: dict[str, TransactionMetadata] = {}
        for header, data in partition.iter_batches():
            if header.is_control:
                continue
            header.position = 0
            for record in read_key_values(data, header):
                if record.key is None:
                    continue
                transactional_id = record.key.decode()
                if record.value is None:
                    transactions.pop(transactional_id, None)
                else:
                    transactions[transactional_id] = TransactionMetadata.from_json(
                        transactional_id, record.value
                    )
        return transactions

    def bump_coordinator_epoch(self) -> int:
        path = self._data_dir / COORDINATOR_EPOCH_FILE
        epoch = int(path.read_text()) + 1 if path.exists() else 0
        write_atomically(path, str(epoch).encode())
        return epoch

    def write(self, metadata: TransactionMetadata) -> Appended:
        """Append the metadata record (fsynced by the log soon)."""
        assert self._partition is not None, "open() first"
        metadata.update_ms = self._clock.now_ms()
        key = metadata.transactional_id.encode()
        return append(self._partition, [KeyValue(key, metadata.to_json())])

    async def persist(
        self,
        metadata: TransactionMetadata,
        before: TransactionMetadata | None,
        transactions: dict[str, TransactionMetadata],
    ) -> None:
        """Write the metadata record and wait until it is durable.

        If it cannot be made durable, the in-memory metadata goes back to ``before`` (or
        is forgotten from ``transactions`` when there was none) and the client is told to
        retry elsewhere, as Kafka's coordinator answers a failed append to its log
        (NOT_COORDINATOR).
        """
        try:
            await self.write(metadata).durable()
        except KafkaError:
            if before is None:
                transactions.pop(metadata.transactional_id, None)
            else:
                metadata.restore(before)
            raise
