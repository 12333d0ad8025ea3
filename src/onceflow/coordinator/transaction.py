"""The transaction coordinator: Kafka's two-phase commit for transactional producers.

Each transactional.id has a metadata record in the internal topic
``__transaction_state``. A transaction moves Empty → Ongoing → PrepareCommit/PrepareAbort
→ CompleteCommit/CompleteAbort. The Prepare state is durable before any marker is
written; after a crash, start-up finishes every transaction left in a Prepare state by
writing its markers again (markers are idempotent for the partitions: a second marker for
a producer with no open transaction changes nothing visible).

Zombie fencing follows KIP-98/KIP-360: InitProducerId bumps the epoch (aborting an open
transaction first); requests with an older epoch get PRODUCER_FENCED. A transaction that
outlives its timeout is aborted by the coordinator with a bumped epoch.

Transactions v2 (KIP-890 part 2, ``transaction.version`` 2, used by clients that send
EndTxn v5+): every EndTxn bumps the producer epoch, the markers carry the bumped epoch (so
a partition fences a zombie's late batch at once), and the answer tells the producer its
new epoch; partitions and the group's offsets join the transaction implicitly with the
first Produce v12+ or TxnOffsetCommit v5+. When the epoch is exhausted the markers keep
the old producer id and epoch and the producer gets a new id, as in Kafka.

This module validates and moves the state machine; ``transaction_log`` stores it,
``transaction_completion`` runs the second phase (markers until durable, then the
completion record) and ``txn_markers`` writes one marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from onceflow.clock import SYSTEM_CLOCK, Clock
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.coordinator.producer_ids import ProducerIdManager
from onceflow.coordinator.transaction_completion import TransactionCompletion
from onceflow.coordinator.transaction_log import TransactionLog
from onceflow.coordinator.transaction_metadata import (
    PREPARING,
    TransactionMetadata,
    TxnState,
)
from onceflow.coordinator.txn_markers import MarkerWriter
from onceflow.log.batch import BatchHeader
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_EPOCH = 2**15 - 1


ENDED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class TransactionCoordinator:
    def __init__(
        self,
        logs: LogManager,
        config: BrokerConfig,
        data_dir: Path,
        producer_ids: ProducerIdManager,
        groups: GroupCoordinator,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.logs = logs
        self.config = config
        self.data_dir = data_dir
        self.producer_ids = producer_ids
        self.groups = groups
        self.clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        self.log = TransactionLog(logs, data_dir, clock)
        self.markers = MarkerWriter(logs, groups.offsets)
        self.completion = TransactionCompletion(self.markers, self.log, clock)
        self._timeout_task: asyncio.Task[None] | None = None

    @property
    def coordinator_epoch(self) -> int:
        return self.completion.coordinator_epoch

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self.transactions = self.log.open()
        self.completion.coordinator_epoch = self.log.bump_coordinator_epoch()
        for metadata in list(self.transactions.values()):
            if metadata.state in PREPARING:
                await self.completion.recover(metadata)
        interval = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._timeout_task = asyncio.create_task(self._abort_timed_out_loop(interval / 1000))

    async def stop(self) -> None:
        await self.completion.stop()
        if self._timeout_task is not None:
            self._timeout_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timeout_task

    async def _persist(
        self, metadata: TransactionMetadata, before: TransactionMetadata | None
    ) -> None:
        await self.log.persist(metadata, before, self.transactions)

    # -- validation -----------------------------------------------------------------------

    def _get(self, transactional_id: str | None) -> TransactionMetadata:
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "transactional id is empty")
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            raise KafkaError(
                ErrorCode.invalid_producer_id_mapping,
                f"no producer id for transactional id {transactional_id}",
            )
        return metadata

    def _check_producer(self, metadata: TransactionMetadata, producer_id: int, epoch: int) -> None:
        if producer_id != metadata.producer_id:
            raise KafkaError(
                ErrorCode.invalid_producer_id_mapping,
                f"producer id {producer_id} does not own {metadata.transactional_id}",
            )
        if epoch != metadata.producer_epoch:
            raise KafkaError(
                ErrorCode.producer_fenced,
                f"epoch {epoch} of {metadata.transactional_id} was fenced by epoch "
                f"{metadata.producer_epoch}",
            )
        if metadata.busy or metadata.state in PREPARING:
            raise KafkaError(ErrorCode.concurrent_transactions, "transaction is completing")

    # -- InitProducerId -------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: float, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "transactional id is empty")
        if timeout_ms <= 0 or timeout_ms > self.config["transaction.max.timeout.ms"]:
            raise KafkaError(
                ErrorCode.invalid_transaction_timeout,
                f"transaction timeout {timeout_ms:.0f} ms is outside "
                f"(0, {self.config['transaction.max.timeout.ms']}]",
            )
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            metadata = TransactionMetadata(
                transactional_id, self._new_producer_id(), 0, int(timeout_ms)
            )
            self.transactions[transactional_id] = metadata
            metadata.busy = True
            try:
                await self._persist(metadata, None)
            finally:
                metadata.busy = False
            return metadata.producer_id, metadata.producer_epoch
        if metadata.busy or metadata.state in PREPARING:
            raise KafkaError(ErrorCode.concurrent_transactions, "transaction is completing")
        if producer_id >= 0 and not (
            producer_id == metadata.producer_id
            and producer_epoch in (metadata.producer_epoch, metadata.last_producer_epoch)
        ):
            raise KafkaError(
                ErrorCode.producer_fenced,
                f"producer {producer_id} epoch {producer_epoch} is not the current owner of "
                f"{transactional_id}",
            )
        metadata.busy = True
        try:
            if metadata.state == TxnState.ONGOING:
                # Fence the previous incarnation: abort its transaction with a newer epoch.
                before = metadata.copy()
                self._bump_epoch(metadata)
                await self._end(metadata, committed=False, before=before)
            before = metadata.copy()
            self._bump_epoch(metadata)
            metadata.last_producer_epoch = -1
            metadata.timeout_ms = int(timeout_ms)
            metadata.state = TxnState.EMPTY
            metadata.start_ms = -1
            metadata.partitions.clear()
            await self._persist(metadata, before)
        finally:
            metadata.busy = False
        return metadata.producer_id, metadata.producer_epoch

    def _new_producer_id(self) -> int:
        return self.producer_ids.next_id()

    def _bump_epoch(self, metadata: TransactionMetadata) -> None:
        if metadata.producer_epoch >= MAX_EPOCH - 1:
            metadata.producer_id = self._new_producer_id()
            metadata.producer_epoch = 0
        else:
            metadata.producer_epoch += 1

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        metadata = self._get(transactional_id)
        self._check_producer(metadata, producer_id, epoch)
        unknown = [tp for tp in partitions if not self.logs.has_partition(tp)]
        if unknown:
            return {
                tp: ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.operation_not_attempted
                for tp in partitions
            }
        new = set(partitions) - metadata.partitions
        if metadata.state == TxnState.ONGOING and not new:
            return dict.fromkeys(partitions, ErrorCode.none)
        metadata.busy = True
        try:
            before = metadata.copy()
            if metadata.state != TxnState.ONGOING:
                metadata.state = TxnState.ONGOING
                metadata.start_ms = self.clock.now_ms()
                metadata.partitions.clear()
            metadata.partitions |= set(partitions)
            await self._persist(metadata, before)
        finally:
            metadata.busy = False
        return dict.fromkeys(partitions, ErrorCode.none)

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return CONSUMER_OFFSETS_TOPIC, self.groups.offsets_partition_for(group_id)

    async def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        result = await self.add_partitions(
            transactional_id, producer_id, epoch, [self.offsets_partition(group_id)]
        )
        return next(iter(result.values()))

    def check_offsets_added(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> None:
        """TxnOffsetCommit is allowed only after AddOffsetsToTxn for that group."""
        metadata = self._get(transactional_id)
        if producer_id != metadata.producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping, "unknown producer id")
        if epoch != metadata.producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced, "producer epoch was fenced")
        partition = self.offsets_partition(group_id)
        if metadata.state != TxnState.ONGOING or partition not in metadata.partitions:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"group {group_id} was not added to the transaction (AddOffsetsToTxn)",
            )

    # -- produce verification (KIP-890 part 1) ------------------------------------------

    async def add_produce_partition(
        self, transactional_id: str | None, header: BatchHeader, topic: str, partition: int
    ) -> None:
        """Transactions v2 (Produce v12+): a transactional batch adds its partition."""
        if not header.is_transactional or transactional_id is None:
            return
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != header.producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping, "unknown producer id")
        if header.producer_epoch < metadata.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch, "producer epoch was fenced")
        if metadata.state == TxnState.ONGOING and (topic, partition) in metadata.partitions:
            return
        try:
            await self.add_partitions(
                transactional_id, header.producer_id, header.producer_epoch, [(topic, partition)]
            )
        except KafkaError as error:
            if error.code == ErrorCode.producer_fenced:  # Produce knows it by this name
                raise KafkaError(ErrorCode.invalid_producer_epoch, error.message) from None
            raise

    def verify_produce(
        self, transactional_id: str | None, header: BatchHeader, topic: str, partition: int
    ) -> None:
        if not header.is_transactional:
            return  # an idempotent batch on a transactional producer's connection
        if transactional_id is None:
            raise KafkaError(
                ErrorCode.invalid_txn_state, "transactional batch without a transactional id"
            )
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != header.producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping, "unknown producer id")
        if header.producer_epoch < metadata.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch, "producer epoch was fenced")
        if metadata.state != TxnState.ONGOING or (topic, partition) not in metadata.partitions:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"{topic}-{partition} is not part of an ongoing transaction of {transactional_id}",
            )

    # -- EndTxn ---------------------------------------------------------------------------

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        committed: bool,
        version_2: bool = False,
    ) -> tuple[int, int]:
        """EndTxn; answers the producer id and epoch the producer goes on with."""
        metadata = self._get(transactional_id)
        done = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        if version_2 and metadata.state == done and not metadata.busy:
            # A retry whose answer was lost: the epoch (or id) has moved on since.
            retried = (producer_id, epoch) == (metadata.producer_id, metadata.last_producer_epoch)
            current = (producer_id, epoch) == (metadata.producer_id, metadata.producer_epoch)
            if retried or (current and committed):  # an abort at the current epoch: below
                return metadata.producer_id, metadata.producer_epoch
        if producer_id != metadata.producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping, "unknown producer id")
        if epoch != metadata.producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced, "producer epoch was fenced")
        if metadata.busy or metadata.state in PREPARING:
            raise KafkaError(ErrorCode.concurrent_transactions, "transaction is completing")
        if metadata.state == done and not version_2:
            return metadata.producer_id, metadata.producer_epoch  # a retried EndTxn
        if version_2 and not committed and metadata.state in ENDED:
            # Kafka's transactions v2 let a producer abort with nothing begun: the epoch
            # moves on (and fences any older producer), no marker to write; with no
            # partition added, the abort's time is the transaction's start time.
            metadata.busy = True
            try:
                before = metadata.copy()
                metadata.start_ms = self.clock.now_ms()
                self._bump_for_markers(metadata)
                await self._end(metadata, committed, before=before)
            finally:
                metadata.busy = False
            return metadata.producer_id, metadata.producer_epoch
        if metadata.state != TxnState.ONGOING:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"cannot {'commit' if committed else 'abort'} {transactional_id} in state "
                f"{metadata.state.value}",
            )
        metadata.busy = True
        try:
            before = metadata.copy()
            if version_2:
                self._bump_for_markers(metadata)
            await self._end(metadata, committed, before=before)
        finally:
            metadata.busy = False
        return metadata.producer_id, metadata.producer_epoch

    def _bump_for_markers(self, metadata: TransactionMetadata) -> None:
        """Transactions v2: the markers carry a new epoch (or the producer gets a new id)."""
        metadata.last_producer_epoch = metadata.producer_epoch
        if metadata.producer_epoch >= MAX_EPOCH - 1:
            metadata.next_producer_id = self._new_producer_id()
        else:
            metadata.producer_epoch += 1

    async def _end(
        self,
        metadata: TransactionMetadata,
        committed: bool,
        before: TransactionMetadata | None = None,
    ) -> None:
        """Two-phase commit: the decision is durable before any marker is written."""
        before = before or metadata.copy()
        metadata.state = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        await self._persist(metadata, before)
        await self.completion.complete(metadata, committed)

    # -- timeouts -------------------------------------------------------------------------

    async def _abort_timed_out_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
            except Exception:
                log.exception("aborting timed-out transactions failed")

    async def abort_timed_out(self) -> int:
        now = self.clock.now_ms()
        aborted = 0
        for metadata in list(self.transactions.values()):
            if metadata.state != TxnState.ONGOING or metadata.busy:
                continue
            if now - metadata.start_ms <= metadata.timeout_ms:
                continue
            log.info("aborting %s: transaction timed out", metadata.transactional_id)
            metadata.busy = True
            try:
                before = metadata.copy()
                old_epoch = metadata.producer_epoch
                self._bump_epoch(metadata)
                metadata.last_producer_epoch = old_epoch
                await self._end(metadata, committed=False, before=before)
            except KafkaError as error:
                log.warning("cannot abort %s yet: %s", metadata.transactional_id, error)
                continue
            finally:
                metadata.busy = False
            aborted += 1
        return aborted

    # -- inspection -----------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def listing(self) -> list[TransactionMetadata]:
        return sorted(self.transactions.values(), key=lambda m: m.transactional_id)
