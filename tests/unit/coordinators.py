"""The group and transaction coordinators as the broker runs them, without a network: on a
real LogManager in a directory, with a ManualClock that moves only when a test advances
it. Their background loops run on real time with intervals longer than any test; a test
drives the timers itself (``groups.tick``, ``transactions.abort_timed_out``)."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import signal
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from onceflow.clock import ManualClock, now_ms
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.producer_ids import ProducerIdManager
from onceflow.coordinator.transaction import TransactionCoordinator
from onceflow.log.batch import ATTR_TRANSACTIONAL, KeyValue, build_batch, parse_header
from onceflow.log.manager import LogManager
from onceflow.log.partition_log import PartitionLog

TOPIC = "t"
NEVER_MS = "3600000"  # a background loop's interval: it never fires during a test


@dataclass
class Coordinators:
    logs: LogManager
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    clock: ManualClock


@contextlib.asynccontextmanager
async def running_coordinators(
    data_dir: Path, clock: ManualClock | None = None, **settings: str
) -> AsyncIterator[Coordinators]:
    """Both coordinators started on ``data_dir`` (a topic ``t`` with 2 partitions), as
    ``BrokerCore`` starts them; stopped and closed afterwards."""
    clock = clock or ManualClock()
    config = BrokerConfig.from_strings(
        {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": NEVER_MS,
            "group.min.session.timeout.ms": "100",
            **settings,
        }
    )
    logs = LogManager(data_dir, config)
    logs.load()
    producer_ids = ProducerIdManager(data_dir)
    producer_ids.load()
    logs.start()
    if TOPIC not in logs.topics:
        logs.create_topic(TOPIC, 2)
    groups = GroupCoordinator(logs, config, clock.clock)
    transactions = TransactionCoordinator(logs, config, data_dir, producer_ids, groups, clock.clock)
    await groups.start()
    await transactions.start()
    try:
        yield Coordinators(logs, groups, transactions, clock)
    finally:
        await transactions.stop()
        await groups.stop()
        await logs.stop()
        logs.close()


def transactional_batch(value: bytes, producer_id: int, epoch: int, sequence: int) -> bytes:
    """A producer's transactional batch of one record, as a client sends it."""
    data = bytearray(
        build_batch(
            0,
            [KeyValue(None, value)],
            now_ms(),  # as a producer stamps it: a marker after it stays in its segment
            attributes=ATTR_TRANSACTIONAL,
            producer_id=producer_id,
            producer_epoch=epoch,
        )
    )
    struct.pack_into(">i", data, 53, sequence)  # baseSequence
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def produce_in_transaction(
    partition: PartitionLog, value: bytes, producer_id: int, epoch: int, sequence: int = 0
) -> int:
    """Append a transactional batch to the partition; its offset."""
    data = transactional_batch(value, producer_id, epoch, sequence)
    return partition.append_client_batch(data, parse_header(data)).base_offset


async def next_turn() -> None:
    """Let every task that is ready take its next step (a JoinGroup that must wait for the
    rest of the group registers itself and waits)."""
    loop = asyncio.get_running_loop()
    turn: asyncio.Future[None] = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn


@contextlib.contextmanager
def file_size_limit(size: int) -> Iterator[None]:
    """Writes that would make any file of this process larger than ``size`` bytes fail
    with EFBIG, as on a full disk, until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
