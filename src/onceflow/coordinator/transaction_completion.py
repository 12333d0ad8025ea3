"""The second phase of a transaction: once its Prepare record is durable, a marker goes to
every partition in it until each one is durable, and then the completion is recorded.

A transaction whose Prepare record is durable is never given up: markers the disk refuses
are written again, with a growing pause on the coordinator's clock, until they are
durable. After a crash, start-up finishes every transaction left in a Prepare state the
same way (markers are idempotent for the partitions: a second marker for a producer with
no open transaction changes nothing visible).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from onceflow.clock import Clock
from onceflow.coordinator.transaction_log import TransactionLog
from onceflow.coordinator.transaction_metadata import TransactionMetadata, TxnState
from onceflow.coordinator.txn_markers import Marker, MarkerWriter
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MARKER_RETRY_SECONDS = (0.05, 2.0)  # first and longest wait between marker attempts


class TransactionCompletion:
    def __init__(self, markers: MarkerWriter, transaction_log: TransactionLog, clock: Clock):
        self._markers = markers
        self._log = transaction_log
        self._clock = clock
        self.coordinator_epoch = 0
        self._background: set[asyncio.Task[None]] = set()
        self.completed = {True: 0, False: 0}  # transactions committed, aborted since start

    async def complete(
        self,
        metadata: TransactionMetadata,
        committed: bool,
        pending: list[tuple[str, int]] | None = None,
    ) -> None:
        """Write the markers (to ``pending``, by default every partition of the
        transaction) until every one is durable, then record the completion."""
        if pending is None:
            pending = sorted(metadata.partitions)
        delay, longest = MARKER_RETRY_SECONDS
        while pending := await self._write_markers(metadata, committed, pending):
            await self._clock.sleep(delay)
            delay = min(delay * 2, longest)
        self._mark_complete(metadata, committed)

    async def recover(self, metadata: TransactionMetadata) -> None:
        """Finish a transaction found in a Prepare state at start-up: one attempt now, and
        while the disk refuses markers, the next ones in the background (start-up goes on;
        the transaction stays busy meanwhile)."""
        committed = metadata.state == TxnState.PREPARE_COMMIT
        log.info("completing %s left in %s", metadata.transactional_id, metadata.state)
        pending = await self._write_markers(metadata, committed, sorted(metadata.partitions))
        if not pending:
            self._mark_complete(metadata, committed)
            return
        metadata.busy = True
        task = asyncio.create_task(self.complete(metadata, committed, pending))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop(self) -> None:
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _write_markers(
        self, metadata: TransactionMetadata, committed: bool, partitions: list[tuple[str, int]]
    ) -> list[tuple[str, int]]:
        """Append a marker to each partition and wait for it; return those that failed."""
        marker = Marker(
            metadata.producer_id, metadata.producer_epoch, committed, self.coordinator_epoch
        )
        settling: list[tuple[tuple[str, int], asyncio.Future[None]]] = []
        failed: list[tuple[str, int]] = []
        for topic, number in partitions:
            try:
                settling.append(((topic, number), self._markers.append(marker, topic, number)))
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
        outcomes = await asyncio.gather(*(s for _, s in settling), return_exceptions=True)
        failed += [
            partition
            for (partition, _), outcome in zip(settling, outcomes, strict=True)
            if isinstance(outcome, BaseException)
        ]
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
        self.completed[committed] += 1
        metadata.partitions.clear()
        if metadata.next_producer_id >= 0:
            metadata.producer_id, metadata.producer_epoch = metadata.next_producer_id, 0
            metadata.next_producer_id = metadata.last_producer_epoch = -1
        metadata.busy = False
        try:
            self._log.write(metadata)
        except KafkaError as error:
            log.warning(
                "cannot record the completion of %s (recovery writes its markers again): %s",
                metadata.transactional_id,
                error,
            )
