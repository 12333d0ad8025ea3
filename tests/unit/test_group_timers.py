"""The group coordinator's timers on a ManualClock: session expiry in the classic and the
KIP-848 protocol, rebalance and sync deadlines, pending members, and members whose
connection closes (onceflow.group.leave.on.disconnect). Time moves only with the test."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from onceflow.coordinator.consumer_group import JOIN_EPOCH, HeartbeatRequest, HeartbeatResponse
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.group_metadata import GroupState, JoinResult, SyncResult
from onceflow.coordinator.group_requests import JoinGroupRequest, SyncGroupRequest
from onceflow.protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinators import TOPIC, Coordinators, next_turn, running_coordinators

SESSION_MS = 10_000
REBALANCE_MS = 30_000
GROUP = "g"
WAIT = 10  # seconds a test waits for an answer the coordinator owes it: a failure, not time


def join_request(member_id: str = "", rebalance_ms: int = REBALANCE_MS) -> JoinGroupRequest:
    return JoinGroupRequest(
        GROUP,
        member_id,
        None,
        "client",
        "/127.0.0.1",
        SESSION_MS,
        rebalance_ms,
        "consumer",
        [("range", b"")],
        require_known_member_id=True,
    )


async def new_member(groups: GroupCoordinator) -> str:
    """KIP-394: the first JoinGroup only gets a member id."""
    first = await groups.classic.join_group(join_request())
    assert first.error == ErrorCode.member_id_required
    return first.member_id


async def stable_group(groups: GroupCoordinator, count: int) -> list[str]:
    """``count`` members joined and synced; the first one leads."""
    members = [await new_member(groups) for _ in range(count)]
    joins = [asyncio.ensure_future(groups.classic.join_group(join_request(m))) for m in members]
    joined: list[JoinResult] = await asyncio.wait_for(asyncio.gather(*joins), WAIT)
    generation = joined[0].generation_id
    leader = joined[0].leader_id
    syncs = [
        groups.classic.sync_group(
            SyncGroupRequest(
                GROUP,
                generation,
                m,
                None,
                None,
                None,
                {x: b"" for x in members} if m == leader else {},
            )
        )
        for m in members
    ]
    synced: list[SyncResult] = await asyncio.wait_for(asyncio.gather(*syncs), WAIT)
    assert all(result.error == ErrorCode.none for result in synced)
    assert groups.groups[GROUP].state == GroupState.STABLE
    return members


def heartbeat(c: Coordinators, member_id: str) -> ErrorCode:
    generation = c.groups.groups[GROUP].generation_id
    return c.groups.classic.heartbeat(GROUP, member_id, None, generation)


def tick_after(c: Coordinators, seconds: float) -> None:
    c.clock.advance(seconds)
    c.groups.tick(c.clock.monotonic())


def test_a_classic_member_is_removed_once_its_heartbeats_stop_for_its_session(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            live, silent = await stable_group(c.groups, 2)
            tick_after(c, 9.0)
            assert heartbeat(c, live) == ErrorCode.none
            group = c.groups.groups[GROUP]
            assert set(group.members) == {live, silent}
            tick_after(c, 1.001)  # the silent member: 10.001 s since its last heartbeat
            assert list(group.members) == [live]
            assert group.state == GroupState.PREPARING_REBALANCE
            assert heartbeat(c, live) == ErrorCode.rebalance_in_progress
            assert c.groups.classic.heartbeat(GROUP, silent, None, 1) == ErrorCode.unknown_member_id
            rejoined = await asyncio.wait_for(c.groups.classic.join_group(join_request(live)), WAIT)
            assert (rejoined.error, rejoined.leader_id) == (ErrorCode.none, live)
            assert rejoined.generation_id == 2
            tick_after(c, REBALANCE_MS / 1000 + 0.001)  # it never sent SyncGroup
            assert not group.members and group.state == GroupState.EMPTY

    asyncio.run(scenario())


def test_exactly_at_its_session_timeout_a_member_is_still_in_the_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            (member,) = await stable_group(c.groups, 1)
            tick_after(c, SESSION_MS / 1000)
            group = c.groups.groups[GROUP]
            assert list(group.members) == [member]
            tick_after(c, 0.001)
            assert not group.members and group.state == GroupState.EMPTY

    asyncio.run(scenario())


def test_a_rebalance_waits_for_its_rebalance_timeout_then_drops_who_did_not_rejoin(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            first, second = await stable_group(c.groups, 2)
            newcomer = await new_member(c.groups)
            joins = [
                asyncio.ensure_future(c.groups.classic.join_group(join_request(m)))
                for m in (newcomer, first)
            ]
            await next_turn()
            group = c.groups.groups[GROUP]
            assert group.state == GroupState.PREPARING_REBALANCE
            for _ in range(3):  # the second member beats on but never rejoins
                tick_after(c, 9.0)
                assert heartbeat(c, second) == ErrorCode.rebalance_in_progress
            assert not any(join.done() for join in joins)
            tick_after(c, REBALANCE_MS / 1000 - 27 + 0.001)
            results = await asyncio.wait_for(asyncio.gather(*joins), WAIT)
            assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
            assert set(group.members) == {first, newcomer}
            assert group.state == GroupState.COMPLETING_REBALANCE
            tick_after(c, REBALANCE_MS / 1000 + 0.001)  # nobody sent SyncGroup in time
            assert not group.members and group.state == GroupState.EMPTY

    asyncio.run(scenario())


def test_a_member_id_handed_out_and_never_used_expires_with_its_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            pending = await new_member(c.groups)
            group = c.groups.groups[GROUP]
            tick_after(c, SESSION_MS / 1000 - 0.001)
            assert pending in group.pending_members
            tick_after(c, 0.001)  # its deadline: the session timeout after it was handed out
            assert pending not in group.pending_members
            late = await asyncio.wait_for(c.groups.classic.join_group(join_request(pending)), WAIT)
            assert late.error == ErrorCode.unknown_member_id

    asyncio.run(scenario())


def consumer_heartbeat(
    c: Coordinators, group_id: str, member_id: str, epoch: int
) -> HeartbeatResponse:
    """ConsumerGroupHeartbeat (KIP-848): a join subscribes to the topic, later beats carry
    the member's epoch and nothing else."""
    joining = epoch == JOIN_EPOCH
    return c.groups.consumer_protocol.heartbeat(
        HeartbeatRequest(
            group_id,
            member_id,
            epoch,
            None,
            None,
            REBALANCE_MS if joining else -1,
            [TOPIC] if joining else None,
            None,
            None,
            None,
        ),
        1,
    )


def test_a_consumer_group_member_expires_once_its_heartbeats_stop(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = {"group.consumer.session.timeout.ms": str(SESSION_MS)}
        async with running_coordinators(tmp_path, **settings) as c:
            consumer_heartbeat(c, "cg", "m1", JOIN_EPOCH)
            silent = consumer_heartbeat(c, "cg", "m2", JOIN_EPOCH)
            consumer = c.groups.groups["cg"].consumer
            assert consumer is not None and set(consumer.members) == {"m1", "m2"}
            epoch_with_both = consumer.group_epoch
            tick_after(c, 9.0)
            consumer_heartbeat(c, "cg", "m1", consumer.members["m1"].member_epoch)
            tick_after(c, 1.0)
            assert set(consumer.members) == {"m1", "m2"}  # 10 s: still within its session
            tick_after(c, 0.001)
            assert set(consumer.members) == {"m1"}
            assert consumer.group_epoch == epoch_with_both + 1
            with pytest.raises(KafkaError) as gone:
                consumer_heartbeat(c, "cg", "m2", silent.member_epoch)
            assert gone.value.code == ErrorCode.unknown_member_id
            tick_after(c, SESSION_MS / 1000 + 0.001)
            assert consumer.is_empty()

    asyncio.run(scenario())


def test_a_member_whose_connection_closes_leaves_at_once(tmp_path: Path) -> None:
    """onceflow.group.leave.on.disconnect: the broker names the members a closed
    connection had; they leave without waiting for their session timeout."""

    async def scenario() -> None:
        async with running_coordinators(tmp_path) as c:
            gone, kept = await stable_group(c.groups, 2)
            consumer_heartbeat(c, "cg", "m1", JOIN_EPOCH)
            consumer = c.groups.groups["cg"].consumer
            assert consumer is not None
            c.groups.members_disconnected({GROUP: gone, "cg": "m1", "no-such-group": "x"})
            group = c.groups.groups[GROUP]
            assert list(group.members) == [kept]
            assert group.state == GroupState.PREPARING_REBALANCE
            assert consumer.is_empty()
            c.groups.members_disconnected({GROUP: kept})
            assert not group.members and group.state == GroupState.EMPTY

    asyncio.run(scenario())
