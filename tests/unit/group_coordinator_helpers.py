"""A group coordinator on a real LogManager in a temporary directory, without a network,
for test_group_coordinator_*.py: opening and closing it, and its requests as a client
sends them (JoinGroup with the KIP-394 round trip, SyncGroup, OffsetCommit,
TxnOffsetCommit). Timers are driven by calling ``tick`` on a ManualClock the test
advances, so nothing here sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path

from onceflow.clock import ManualClock
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.group_requests import (
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

SESSION = 10_000
RANGE = [("range", b"range-metadata")]


class BrokerFiles:
    def __init__(self, data_dir: Path, config: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.config = BrokerConfig.from_strings(
            {"group.min.session.timeout.ms": "100", "log.flush.policy": "os", **config}
        )
        self.logs = LogManager(data_dir, self.config)


async def open_coordinator(
    path: Path, clock: ManualClock | None = None, **config: str
) -> tuple[BrokerFiles, GroupCoordinator]:
    broker = BrokerFiles(path, config)
    broker.logs.load()
    broker.logs.start()
    if "t" not in broker.logs.topics:
        broker.logs.create_topic("t", 6)
    groups = GroupCoordinator(broker.logs, broker.config, (clock or ManualClock()).clock)
    await groups.start()
    return broker, groups


async def close(broker: BrokerFiles, groups: GroupCoordinator) -> None:
    await groups.stop()
    await broker.logs.stop()
    broker.logs.close()


async def sync(groups: GroupCoordinator, *fields):
    return await groups.classic.sync_group(SyncGroupRequest(*fields))


async def commit(groups: GroupCoordinator, *fields):
    return await groups.offsets.commit(OffsetCommitRequest(*fields))


async def txn_commit(groups: GroupCoordinator, *fields):
    return await groups.offsets.commit_transactional(TxnOffsetCommitRequest(*fields))


def run(coroutine):
    return asyncio.run(coroutine)


async def join(
    groups: GroupCoordinator,
    member_id: str = "",
    *,
    group_id: str = "g",
    instance: str | None = None,
    protocols=RANGE,
    session: int = SESSION,
    rebalance: int = SESSION,
    protocol_type: str = "consumer",
):
    return await groups.classic.join_group(
        JoinGroupRequest(
            group_id,
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            session,
            rebalance,
            protocol_type,
            list(protocols),
            require_known_member_id=True,
        )
    )


async def join_new(groups: GroupCoordinator, **kwargs):
    """The KIP-394 round trip: MEMBER_ID_REQUIRED, then join with the given id."""
    first = await join(groups, **kwargs)
    assert first.error == ErrorCode.member_id_required
    assert first.member_id.startswith("client-")
    return first.member_id
