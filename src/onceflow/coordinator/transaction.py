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
from onceflow.coordinator.internal_log import INTERNAL_TOPIC_CONFIG, Appended, append
from onceflow.coordinator.producer_ids import ProducerIdManager
from onceflow.coordinator.transaction_metadata import (
    PREPARING,
    TransactionMetadata,
    TxnState,
)
from onceflow.log.batch import CONTROL_ABORT, CONTROL_COMMIT, BatchHeader, KeyValue, read_key_values
from onceflow.log.durability import write_atomically
from onceflow.log.manager import LogManager
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_EPOCH = 2**15 - 1
MARKER_RETRY_SECONDS = (0.05, 2.0)  # first and longest wait between marker attempts


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
        self.coordinator_epoch = 0
        self._state_log: PartitionLog | None = None
        self._timeout_task: asyncio.Task[None] | None = None
        self._completions: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        logs = self.logs
        if TRANSACTION_STATE_TOPIC not in logs.topics:
            logs.create_topic(TRANSACTION_STATE_TOPIC, 1, 1, INTERNAL_TOPIC_CONFIG, internal=True)
        self._state_log = logs.partition(TRANSACTION_STATE_TOPIC, 0)
        self.coordinator_epoch = self._bump_coordinator_epoch()
        if self._state_log.offline:
            log.error(
                "%s is offline: transactions cannot be loaded (%s)",
                TRANSACTION_STATE_TOPIC,
                self._state_log.offline,
            )
        else:
            self._replay()
        for metadata in list(self.transactions.values()):
            if metadata.state in PREPARING:
                committed = metadata.state == TxnState.PREPARE_COMMIT
                log.info("completing %s left in %s", metadata.transactional_id, metadata.state)
                pending = await self._write_markers(
                    metadata, committed, sorted(metadata.partitions)
                )
                if pending:  # the disk refuses: keep trying without holding up start-up
                    metadata.busy = True
                    task = asyncio.create_task(self._complete_later(metadata, committed, pending))
                    self._completions.add(task)
                    task.add_done_callback(self._completions.discard)
                else:
                    self._mark_complete(metadata, committed)
        interval = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._timeout_task = asyncio.create_task(self._abort_timed_out_loop(interval / 1000))

    async def stop(self) -> None:
        tasks = [*self._completions, *([self._timeout_task] if self._timeout_task else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _bump_coordinator_epoch(self) -> int:
        path = self.data_dir / "transaction_coordinator_epoch"
        epoch = int(path.read_text()) + 1 if path.exists() else 0
        write_atomically(path, str(epoch).encode())
        return epoch

    def _replay(self) -> None:
        assert self._state_log is not None
        for header, data in self._state_log.iter_batches():
            if header.is_control:
                continue
            header.position = 0
            for record in read_key_values(data, header):
                if record.key is None:
                    continue
                transactional_id = record.key.decode()
                if record.value is None:
                    self.transactions.pop(transactional_id, None)
                else:
                    self.transactions[transactional_id] = TransactionMetadata.from_json(
                        transactional_id, record.value
                    )

    async def _persist(
        self, metadata: TransactionMetadata, before: TransactionMetadata | None
    ) -> None:
        """Write the metadata record and wait until it is durable.

        If it cannot be made durable, the in-memory metadata goes back to ``before`` (or
        is forgotten when there was none) and the client is told to retry elsewhere, as
        Kafka's coordinator answers a failed append to its log (NOT_COORDINATOR).
        """
        try:
            await self._write(metadata).durable()
        except KafkaError:
            if before is None:
                self.transactions.pop(metadata.transactional_id, None)
            else:
                metadata.restore(before)
            raise

    def _write(self, metadata: TransactionMetadata) -> Appended:
        """Append the metadata record (fsynced by the log soon)."""
        assert self._state_log is not None
        metadata.update_ms = self.clock.now_ms()
        return append(
            self._state_log, [KeyValue(metadata.transactional_id.encode(), metadata.to_json())]
        )

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
        await self._complete_later(metadata, committed, sorted(metadata.partitions))

    async def _complete_later(
        self, metadata: TransactionMetadata, committed: bool, pending: list[tuple[str, int]]
    ) -> None:
        """Write the markers until every one is durable, then record the completion.

        A transaction whose Prepare record is durable is never given up: markers the disk
        refuses are written again, with a growing pause, until they are durable.
        """
        delay, longest = MARKER_RETRY_SECONDS
        while pending := await self._write_markers(metadata, committed, pending):
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
        self._mark_complete(metadata, committed)

    async def _write_markers(
        self, metadata: TransactionMetadata, committed: bool, partitions: list[tuple[str, int]]
    ) -> list[tuple[str, int]]:
        """Append a marker to each partition and wait for it; return those that failed."""
        control_type = CONTROL_COMMIT if committed else CONTROL_ABORT
        appended: list[tuple[tuple[str, int], PartitionLog]] = []
        failed: list[tuple[str, int]] = []
        for topic, number in partitions:
            try:
                partition = self.logs.partition(topic, number)
                partition.append_marker(
                    metadata.producer_id,
                    metadata.producer_epoch,
                    control_type,
                    self.coordinator_epoch,
                )
            except KafkaError as error:
                if error.code == ErrorCode.kafka_storage_error:
                    failed.append((topic, number))
                    continue
                # A deleted topic, or a partition that already saw a newer epoch: Kafka
                # drops such markers too rather than blocking the transaction forever.
                log.warning(
                    "no %s marker for %s on %s-%d: %s",
                    "commit" if committed else "abort",
                    metadata.transactional_id,
                    topic,
                    number,
                    error,
                )
                continue
            appended.append(((topic, number), partition))
        outcomes = await asyncio.gather(
            *(partition.wait_durable(partition.log_end_offset) for _, partition in appended),
            return_exceptions=True,
        )
        for ((topic, number), _), outcome in zip(appended, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                failed.append((topic, number))
            elif topic == CONSUMER_OFFSETS_TOPIC:
                # Only a durable marker makes the transaction's offsets the group's.
                self.groups.offsets.complete_transaction(metadata.producer_id, committed, number)
        if failed:
            log.warning(
                "the %s markers of %s on %s are not durable yet; writing them again",
                "commit" if committed else "abort",
                metadata.transactional_id,
                ", ".join(f"{t}-{n}" for t, n in failed),
            )
        return failed

    def _mark_complete(self, metadata: TransactionMetadata, committed: bool) -> None:
        """Every marker is durable: the transaction is complete.

        The Complete record is written and fsynced, but not waited for: until it is
        durable, recovery finds the Prepare record and writes the same markers again,
        which changes nothing (no partition has this transaction open any more), and any
        later record of this transactional id (the next AddPartitionsToTxn) is durable
        only after it.
        """
        metadata.state = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        metadata.partitions.clear()
        if metadata.next_producer_id >= 0:
            metadata.producer_id, metadata.producer_epoch = metadata.next_producer_id, 0
            metadata.next_producer_id = metadata.last_producer_epoch = -1
        metadata.busy = False
        try:
            self._write(metadata)
        except KafkaError as error:
            log.warning(
                "cannot record the completion of %s (recovery writes its markers again): %s",
                metadata.transactional_id,
                error,
            )

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
