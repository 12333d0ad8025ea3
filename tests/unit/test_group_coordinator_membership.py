"""The group coordinator's membership protocol, without a network: join, sync, heartbeat
and rebalance, the errors Kafka answers, session and rebalance timeouts, leaving, and
static members. Timers are driven by calling ``tick`` on a ManualClock the test
advances, so nothing here sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path

from onceflow.clock import ManualClock
from onceflow.coordinator.group_metadata import GroupState
from onceflow.coordinator.group_requests import OffsetCommitRequest, SyncGroupRequest
from onceflow.protocol.errors import ErrorCode
from tests.unit.coordinators import next_turn
from tests.unit.group_coordinator_helpers import (
    SESSION,
    close,
    join,
    join_new,
    open_coordinator,
    run,
    sync,
)

# -- the membership protocol ----------------------------------------------------------------


def test_join_sync_heartbeat_and_rebalance_on_new_member(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            a = await join_new(groups)
            joined = await join(groups, a)
            assert joined.error == ErrorCode.none
            assert (joined.generation_id, joined.leader_id) == (1, a)
            assert joined.protocol_name == "range"
            assert [m[0] for m in joined.members] == [a]
            assert groups.groups["g"].state == GroupState.COMPLETING_REBALANCE
            assert groups.classic.heartbeat("g", a, None, 1) == ErrorCode.none
            synced = await groups.classic.sync_group(
                SyncGroupRequest("g", 1, a, None, "consumer", "range", {a: b"A1"})
            )
            assert (synced.error, synced.assignment) == (ErrorCode.none, b"A1")
            assert groups.groups["g"].state == GroupState.STABLE

            b = await join_new(groups)
            assert groups.groups["g"].state == GroupState.STABLE  # pending members wait
            b_join = asyncio.ensure_future(join(groups, b))
            await next_turn()
            assert groups.groups["g"].state == GroupState.PREPARING_REBALANCE
            assert groups.classic.heartbeat("g", a, None, 1) == ErrorCode.rebalance_in_progress
            a_join = await join(groups, a)
            b_joined = await b_join
            assert a_join.generation_id == b_joined.generation_id == 2
            assert a_join.leader_id == b_joined.leader_id == a
            assert {m[0] for m in a_join.members} == {a, b} and b_joined.members == []
            b_sync = asyncio.ensure_future(sync(groups, "g", 2, b, None, None, None, {}))
            await next_turn()
            assert not b_sync.done()  # a follower waits for the leader's assignment
            a_sync = await groups.classic.sync_group(
                SyncGroupRequest("g", 2, a, None, None, None, {a: b"A", b: b"B"})
            )
            assert a_sync.assignment == b"A" and (await b_sync).assignment == b"B"
            # a follower rejoining a stable group with the same metadata changes nothing
            again = await join(groups, b)
            assert (again.error, again.generation_id) == (ErrorCode.none, 2)
            assert groups.groups["g"].state == GroupState.STABLE
        finally:
            await close(broker, groups)

    run(scenario())


def test_errors_kafka_answers_and_the_group_keeps_working(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            a = await join_new(groups)
            await join(groups, a)
            await groups.classic.sync_group(
                SyncGroupRequest("g", 1, a, None, None, None, {a: b"A"})
            )
            bad = await join(groups, protocol_type="nonsense")
            assert bad.error == ErrorCode.inconsistent_group_protocol
            other = await join(groups, protocols=[("other", b"")])
            assert other.error == ErrorCode.inconsistent_group_protocol
            absurd = await join(groups, session=10**9)
            assert absurd.error == ErrorCode.invalid_session_timeout
            tiny = await join(groups, session=1)
            assert tiny.error == ErrorCode.invalid_session_timeout
            assert (await join(groups, group_id="")).error == ErrorCode.invalid_group_id
            stranger = await groups.classic.sync_group(
                SyncGroupRequest("g", 1, "stranger", None, None, None, {})
            )
            assert stranger.error == ErrorCode.unknown_member_id
            stale = await groups.classic.sync_group(
                SyncGroupRequest("g", 0, a, None, None, None, {})
            )
            assert stale.error == ErrorCode.illegal_generation
            mismatch = await groups.classic.sync_group(
                SyncGroupRequest("g", 1, a, None, "consumer", "roundrobin", {})
            )
            assert mismatch.error == ErrorCode.inconsistent_group_protocol
            assert groups.classic.heartbeat("g", "stranger", None, 1) == ErrorCode.unknown_member_id
            assert groups.classic.heartbeat("g", a, None, 7) == ErrorCode.illegal_generation
            assert groups.classic.heartbeat("nope", a, None, 1) == ErrorCode.unknown_member_id
            unknown = await join(groups, "made-up-id")
            assert unknown.error == ErrorCode.unknown_member_id
            # none of this disturbed the group
            group = groups.groups["g"]
            assert (group.state, group.generation_id, list(group.members)) == (
                GroupState.STABLE,
                1,
                [a],
            )
            assert groups.classic.heartbeat("g", a, None, 1) == ErrorCode.none
        finally:
            await close(broker, groups)

    run(scenario())


def test_session_timeout_removes_a_silent_member(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        broker, groups = await open_coordinator(tmp_path, clock)
        try:
            a = await join_new(groups)
            b = await join_new(groups)
            a_join = asyncio.ensure_future(join(groups, a))
            await join(groups, b)
            await a_join
            generation = groups.groups["g"].generation_id
            await asyncio.gather(
                groups.classic.sync_group(
                    SyncGroupRequest("g", generation, b, None, None, None, {})
                ),
                groups.classic.sync_group(
                    SyncGroupRequest("g", generation, a, None, None, None, {a: b"A", b: b"B"})
                ),
            )
            clock.advance(SESSION / 1000 - 1)
            assert groups.classic.heartbeat("g", a, None, generation) == ErrorCode.none
            clock.advance(1.5)
            groups.tick(clock.monotonic())  # b has been silent for its session and more
            group = groups.groups["g"]
            assert list(group.members) == [a]
            assert group.state == GroupState.PREPARING_REBALANCE
            assert (
                groups.classic.heartbeat("g", a, None, generation)
                == ErrorCode.rebalance_in_progress
            )
            rejoined = await join(groups, a)
            assert rejoined.generation_id == generation + 1 and rejoined.leader_id == a
        finally:
            await close(broker, groups)

    run(scenario())


def test_rebalance_timeout_drops_members_that_do_not_rejoin(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        broker, groups = await open_coordinator(tmp_path, clock)
        try:
            a = await join_new(groups, rebalance=2000)
            await join(groups, a, rebalance=2000)
            await sync(groups, "g", 1, a, None, None, None, {})
            b = await join_new(groups, rebalance=2000)
            b_join = asyncio.ensure_future(join(groups, b, rebalance=2000))
            await next_turn()
            assert not b_join.done()  # waits for a, which never rejoins
            clock.advance(2.5)  # the rebalance timeout, within a's session
            groups.tick(clock.monotonic())
            result = await b_join
            assert (result.error, result.generation_id, result.leader_id) == (
                ErrorCode.none,
                2,
                b,
            )
            assert list(groups.groups["g"].members) == [b]
            # and a leader that never syncs is removed after the rebalance timeout too
            clock.advance(2.5)  # the sync deadline: 2 s after the join
            groups.tick(clock.monotonic())
            assert groups.groups["g"].state == GroupState.EMPTY
        finally:
            await close(broker, groups)

    run(scenario())


def test_leave_group_and_last_member_empties_the_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            a = await join_new(groups)
            await join(groups, a)
            await sync(groups, "g", 1, a, None, None, None, {})
            top, results = groups.classic.leave_group("g", [(a, None), ("ghost", None)])
            assert top == ErrorCode.none
            assert [code for _, _, code in results] == [
                ErrorCode.none,
                ErrorCode.unknown_member_id,
            ]
            group = groups.groups["g"]
            assert (group.state, group.generation_id) == (GroupState.EMPTY, 2)
            top, results = groups.classic.leave_group("missing", [(a, None)])
            assert results[0][2] == ErrorCode.unknown_member_id
        finally:
            await close(broker, groups)

    run(scenario())


def test_static_member_replaced_by_a_new_instance_fences_the_old_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            first = await join(groups, instance="worker-1")  # static: no MEMBER_ID_REQUIRED
            assert first.error == ErrorCode.none and first.member_id.startswith("worker-1-")
            old = first.member_id
            await groups.classic.sync_group(
                SyncGroupRequest("g", 1, old, "worker-1", None, None, {old: b"A"})
            )
            second = await join(groups, instance="worker-1")
            new = second.member_id
            assert second.error == ErrorCode.none and new != old
            assert second.generation_id == 1  # stable group, same protocol: no rebalance
            assert second.leader_id == old  # so the new instance does not act as leader
            group = groups.groups["g"]
            assert group.state == GroupState.STABLE and list(group.members) == [new]
            assert groups.classic.heartbeat("g", old, "worker-1", 1) == ErrorCode.fenced_instance_id
            fenced = await groups.offsets.commit(
                OffsetCommitRequest("g", old, "worker-1", 1, {("t", 0): (5, -1, "")})
            )
            assert fenced == {("t", 0): ErrorCode.fenced_instance_id}
            synced = await groups.classic.sync_group(
                SyncGroupRequest("g", 1, new, "worker-1", None, None, {})
            )
            assert synced.assignment == b"A"  # keeps its assignment
            _, results = groups.classic.leave_group("g", [("", "worker-1")])
            assert results[0][2] == ErrorCode.none and not group.members
        finally:
            await close(broker, groups)

    run(scenario())
