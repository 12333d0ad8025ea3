"""The transaction coordinator's state machine on real storage, driven by a ManualClock:
epoch bumps and fencing, timeouts, markers the disk refuses, recovery at start-up."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.coordinator.group_requests import TxnOffsetCommitRequest
from onceflow.coordinator.transaction import MAX_EPOCH
from onceflow.coordinator.transaction_completion import MARKER_RETRY_SECONDS
from onceflow.coordinator.transaction_metadata import TransactionMetadata, TxnState
from onceflow.coordinator.txn_markers import Marker
from onceflow.log.batch import CONTROL_COMMIT, control_type_of
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinators import (
    TOPIC,
    Coordinators,
    file_size_limit,
    produce_in_transaction,
    running_coordinators,
)

TIMEOUT_MS = 60_000
LIMIT = 512 * 1024  # the file size limit standing for a full disk
BIG_VALUE = bytes(600 * 1024)  # a batch that leaves its partition's segment past LIMIT


def markers(partition: PartitionLog) -> list[tuple[str, int, int]]:
    """The control batches of a partition: (COMMIT or ABORT, producer id, producer epoch)."""
    found = []
    for header, data in partition.iter_batches():
        if header.is_control:
            kind = "COMMIT" if control_type_of(data, header) == CONTROL_COMMIT else "ABORT"
            found.append((kind, header.producer_id, header.producer_epoch))
    return found


async def begin(c: Coordinators, transactional_id: str, value: bytes = b"v") -> tuple[int, int]:
    """A transactional producer: InitProducerId, then a batch in partition 0."""
    txns = c.transactions
    producer_id, epoch = await txns.init_producer_id(transactional_id, TIMEOUT_MS, -1, -1)
    await txns.add_partitions(transactional_id, producer_id, epoch, [(TOPIC, 0)])
    produce_in_transaction(c.logs.partition(TOPIC, 0), value, producer_id, epoch)
    return producer_id, epoch


async def error_of(awaitable) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        await awaitable
    return raised.value.code


async def next_pause(c: Coordinators) -> float:
    """The length of the coordinator's next pause on its clock, once it begins (a
    coordinator that never pauses fails the test rather than hanging it)."""
    return await asyncio.wait_for(c.clock.paused(), 10)


async def pauses_of(c: Coordinators, count: int) -> list[float]:
    """The next ``count`` pauses the coordinator takes on its clock (each one lived)."""
    pauses = [await next_pause(c)]
    while len(pauses) < count:
        c.clock.advance(pauses[-1])
        pauses.append(await next_pause(c))
    return pauses


def test_init_producer_id_bumps_the_epoch_and_fences_the_older_producer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            txns = c.transactions
            producer_id, epoch = await txns.init_producer_id("tx", TIMEOUT_MS, -1, -1)
            assert epoch == 0
            assert await txns.init_producer_id("tx", TIMEOUT_MS, -1, -1) == (producer_id, 1)
            fenced = txns.add_partitions("tx", producer_id, 0, [(TOPIC, 0)])
            assert await error_of(fenced) == ErrorCode.producer_fenced
            # KIP-360: the current producer may bump its own epoch; an older one may not.
            bumped = await txns.init_producer_id("tx", TIMEOUT_MS, producer_id, 1)
            assert bumped == (producer_id, 2)
            stale = txns.init_producer_id("tx", TIMEOUT_MS, producer_id, 0)
            assert await error_of(stale) == ErrorCode.producer_fenced
            too_long = txns.init_producer_id("other", 900_001, -1, -1)
            assert await error_of(too_long) == ErrorCode.invalid_transaction_timeout
        async with running_coordinators(tmp_path) as c:  # the epoch survives a restart
            restarted = await c.transactions.init_producer_id("tx", TIMEOUT_MS, -1, -1)
            assert restarted == (producer_id, 3)

    asyncio.run(scenario())


def test_a_new_incarnation_aborts_the_open_transaction_with_a_newer_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            producer_id, epoch = await begin(c, "tx")
            partition = c.logs.partition(TOPIC, 0)
            assert partition.last_stable_offset == 0  # the open transaction holds it back
            again = await c.transactions.init_producer_id("tx", TIMEOUT_MS, -1, -1)
            assert again == (producer_id, epoch + 2)
            # The abort marker carries the first bump: the partition itself refuses the old
            # producer's late batches.
            assert markers(partition) == [("ABORT", producer_id, epoch + 1)]
            assert partition.last_stable_offset == partition.log_end_offset == 2
            assert [txn.first_offset for txn in partition.aborted] == [0]
            assert c.transactions.describe("tx").state == TxnState.EMPTY
            with pytest.raises(KafkaError) as late:
                produce_in_transaction(partition, b"late", producer_id, epoch, 1)
            assert late.value.code == ErrorCode.invalid_producer_epoch

    asyncio.run(scenario())


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            txns, clock = c.transactions, c.clock
            producer_id, epoch = await txns.init_producer_id("tx", 10_000, -1, -1)
            await txns.add_partitions("tx", producer_id, epoch, [(TOPIC, 0), (TOPIC, 1)])
            produce_in_transaction(c.logs.partition(TOPIC, 1), b"v", producer_id, epoch)
            clock.advance(10.0)
            assert await txns.abort_timed_out() == 0  # exactly at the timeout: not yet
            clock.advance(0.001)
            assert await txns.abort_timed_out() == 1
            metadata = txns.describe("tx")
            assert (metadata.state, metadata.producer_epoch) == (TxnState.COMPLETE_ABORT, 1)
            assert metadata.last_producer_epoch == 0 and not metadata.partitions
            for number in (0, 1):
                assert markers(c.logs.partition(TOPIC, number)) == [("ABORT", producer_id, 1)]
            commit = txns.end_transaction("tx", producer_id, epoch, committed=True)
            assert await error_of(commit) == ErrorCode.producer_fenced
            clock.advance(3600)
            assert await txns.abort_timed_out() == 0  # nothing is open any more

    asyncio.run(scenario())


def test_end_txn_v2_bumps_the_epoch_and_answers_a_retry_with_the_new_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            txns = c.transactions
            producer_id, epoch = await begin(c, "tx")
            ended = await txns.end_transaction("tx", producer_id, epoch, True, version_2=True)
            assert ended == (producer_id, epoch + 1)
            assert markers(c.logs.partition(TOPIC, 0)) == [("COMMIT", producer_id, epoch + 1)]
            retried = await txns.end_transaction("tx", producer_id, epoch, True, version_2=True)
            assert retried == (producer_id, epoch + 1)  # its answer was lost: the same one
            # An abort with nothing begun moves the epoch on too, and writes no marker.
            aborted = await txns.end_transaction("tx", producer_id, epoch + 1, False, True)
            assert aborted == (producer_id, epoch + 2)
            assert len(markers(c.logs.partition(TOPIC, 0))) == 1

    asyncio.run(scenario())


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:  # ids as __transaction_state has them
            for transactional_id, producer_id, epoch in (
                ("worn", 77, MAX_EPOCH - 2),
                ("worn-v2", 78, MAX_EPOCH - 1),
            ):
                metadata = TransactionMetadata(transactional_id, producer_id, epoch, TIMEOUT_MS)
                await c.transactions.log.write(metadata).durable()
        async with running_coordinators(tmp_path) as c:
            txns = c.transactions
            bumped = await txns.init_producer_id("worn", TIMEOUT_MS, 77, MAX_EPOCH - 2)
            assert bumped == (77, MAX_EPOCH - 1)
            new_id, epoch = await txns.init_producer_id("worn", TIMEOUT_MS, 77, MAX_EPOCH - 1)
            assert new_id != 77 and epoch == 0
            # Transactions v2: the markers keep the old id and epoch; the producer learns
            # its new id from the answer.
            await txns.add_partitions("worn-v2", 78, MAX_EPOCH - 1, [(TOPIC, 1)])
            produce_in_transaction(c.logs.partition(TOPIC, 1), b"v", 78, MAX_EPOCH - 1)
            ended = await txns.end_transaction("worn-v2", 78, MAX_EPOCH - 1, True, version_2=True)
            assert ended[0] not in (77, 78, new_id) and ended[1] == 0
            assert markers(c.logs.partition(TOPIC, 1)) == [("COMMIT", 78, MAX_EPOCH - 1)]

    asyncio.run(scenario())


def test_markers_the_disk_refuses_are_written_again_after_growing_pauses(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            txns, groups = c.transactions, c.groups
            producer_id, epoch = await begin(c, "tx", BIG_VALUE)
            assert await txns.add_offsets("tx", producer_id, epoch, "g") == ErrorCode.none
            tp = (TOPIC, 1)
            request = TxnOffsetCommitRequest(
                "g", producer_id, epoch, "", -1, None, {tp: (42, -1, "")}
            )
            assert await groups.offsets.commit_transactional(request) == {tp: ErrorCode.none}
            partition = c.logs.partition(TOPIC, 0)
            first, longest = MARKER_RETRY_SECONDS
            with file_size_limit(LIMIT):  # t-0's marker would land past it: EFBIG
                ending = asyncio.ensure_future(
                    txns.end_transaction("tx", producer_id, epoch, committed=True)
                )
                pauses = await pauses_of(c, 7)
                assert pauses == pytest.approx([min(first * 2**n, longest) for n in range(7)])
                metadata = txns.describe("tx")
                assert metadata.state == TxnState.PREPARE_COMMIT and metadata.busy
                again = txns.end_transaction("tx", producer_id, epoch, committed=True)
                assert await error_of(again) == ErrorCode.concurrent_transactions
                assert markers(partition) == []
                # The marker on __consumer_offsets was durable at once: the group has them.
                assert groups.offsets.fetch("g", [tp], True)[0][1] == 42
            c.clock.advance(pauses[-1])  # the disk has room again
            assert await ending == (producer_id, epoch)
            assert txns.describe("tx").state == TxnState.COMPLETE_COMMIT
            assert markers(partition) == [("COMMIT", producer_id, epoch)]
            assert partition.last_stable_offset == partition.log_end_offset

    asyncio.run(scenario())


def test_a_transaction_left_prepared_is_completed_at_start_up(tmp_path: Path) -> None:
    """The commit decision is durable before any marker: a coordinator stopped while the
    disk refuses a marker leaves PrepareCommit behind, and the next one finishes it with
    its own, newer coordinator epoch."""

    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            producer_id, epoch = await begin(c, "tx", BIG_VALUE)
            with file_size_limit(LIMIT):
                ending = asyncio.ensure_future(
                    c.transactions.end_transaction("tx", producer_id, epoch, committed=True)
                )
                await next_pause(c)  # the marker was refused
            assert c.transactions.describe("tx").state == TxnState.PREPARE_COMMIT
            first_epoch = c.transactions.coordinator_epoch
            ending.cancel()  # the broker stops
            with contextlib.suppress(asyncio.CancelledError):
                await ending
        async with running_coordinators(tmp_path) as c:
            metadata = c.transactions.describe("tx")
            assert metadata.state == TxnState.COMPLETE_COMMIT and not metadata.busy
            assert c.transactions.coordinator_epoch == first_epoch + 1
            partition = c.logs.partition(TOPIC, 0)
            assert markers(partition) == [("COMMIT", producer_id, epoch)]
            entry = partition.producers.entry(producer_id)
            assert entry is not None and entry.coordinator_epoch == first_epoch + 1

    asyncio.run(scenario())


def test_a_durable_marker_settles_its_offsets_even_if_nobody_waits(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            groups = c.groups
            number = groups.offsets_partition_for("g")
            tp = (TOPIC, 0)
            request = TxnOffsetCommitRequest("g", 500, 0, "", -1, None, {tp: (9, -1, "")})
            await groups.offsets.commit_transactional(request)
            assert groups.offsets.has_pending("g", TOPIC, 0)
            settled = c.transactions.markers.append(
                Marker(500, 0, True, 0), CONSUMER_OFFSETS_TOPIC, number
            )
            settled.cancel()  # as a WriteTxnMarkers whose client went away
            offsets_log = c.logs.partition(CONSUMER_OFFSETS_TOPIC, number)
            # Waiting after the marker's own wait: its settling has run by then.
            await offsets_log.wait_durable(offsets_log.log_end_offset)
            assert not groups.offsets.has_pending("g", TOPIC, 0)
            assert groups.offsets.fetch("g", [tp], True)[0][1] == 9
            with pytest.raises(KafkaError) as refused:
                c.transactions.markers.append(Marker(500, 0, False, 0), TOPIC, 7)
            assert refused.value.code == ErrorCode.unknown_topic_or_partition

    asyncio.run(scenario())
