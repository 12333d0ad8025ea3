"""The group coordinator's state machine and offset store, without a network.

A coordinator runs on a real LogManager in a temporary directory; timers are driven by
calling ``tick`` on a ManualClock the test advances, so nothing here sleeps.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from onceflow.clock import ManualClock
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC, java_string_hash, kafka_abs
from onceflow.coordinator.group_metadata import Group, GroupState, Member
from onceflow.coordinator.group_records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    assigned_partitions,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
    subscribed_topics,
)
from onceflow.coordinator.group_requests import (
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from onceflow.log.batch import CONTROL_ABORT, CONTROL_COMMIT
from onceflow.log.durability import FAIL_ENV
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from tests.unit.coordinators import next_turn

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


# -- pure helpers ---------------------------------------------------------------------------


def test_java_string_hash_and_offsets_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(java_string_hash("polygenelubricants")) == 0
    assert java_string_hash("é") == 233  # UTF-16 code units, not UTF-8 bytes
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two code units


def test_record_formats_round_trip() -> None:
    assert parse_key(offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert parse_key(group_key("g")) == GroupKey("g")
    value = OffsetValue(42, 7, "meta", 1234)
    assert parse_offset_value(offset_value(value)) == value
    group = GroupValue(
        "consumer",
        5,
        "range",
        "m1",
        99,
        [MemberRecord("m1", "i1", "c", "/h", 300, 10, b"sub", b"asg")],
    )
    assert parse_group_value(group_value(group)) == group
    # the consumer protocol: version 0 subscription [t1, t2] and assignment {t1: [0, 2]}
    subscription = b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x02t1" + b"\x00\x02t2" + b"\xff" * 4
    assert subscribed_topics(subscription) == {"t1", "t2"}
    assignment = (
        b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x02t1" + b"\x00\x00\x00\x02"
    ) + b"\x00\x00\x00\x00\x00\x00\x00\x02"
    assert assigned_partitions(assignment) == {"t1": [0, 2]}
    assert subscribed_topics(b"\x01") is None


def member(member_id: str, protocols: list[str]) -> Member:
    return Member(member_id, None, "c", "/h", 1000, 1000, "consumer", [(p, b"") for p in protocols])


def test_protocol_selection_by_votes_among_common_protocols() -> None:
    group = Group("g", GroupState.PREPARING_REBALANCE)
    group.add(member("a", ["roundrobin", "range", "sticky"]))
    group.add(member("b", ["range", "roundrobin"]))
    group.add(member("c", ["range", "roundrobin"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"  # two votes against one
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])
    empty = Group("e")
    assert not empty.supports_protocols("", ["range"])
    assert not empty.supports_protocols("consumer", [])


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


# -- offsets --------------------------------------------------------------------------------


def test_offset_commit_generation_rules(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            tp = ("t", 0)
            # no group and generation >= 0: ILLEGAL_GENERATION (v9+: GROUP_ID_NOT_FOUND);
            # generation -1: a simple commit
            assert await groups.offsets.commit(
                OffsetCommitRequest("s", "", None, 3, {tp: (1, -1, "")}, api_version=8)
            ) == {tp: ErrorCode.illegal_generation}
            assert await groups.offsets.commit(
                OffsetCommitRequest("s", "", None, 3, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.group_id_not_found}
            assert await groups.offsets.commit(
                OffsetCommitRequest("s", "", None, -1, {tp: (5, 2, "m")})
            ) == {tp: ErrorCode.none}
            assert groups.offsets.fetch("s", [tp], False) == [(tp, 5, 2, "m", ErrorCode.none)]
            unknown = ("nope", 0)
            result = await groups.offsets.commit(
                OffsetCommitRequest("s", "", None, -1, {unknown: (1, -1, None)})
            )
            assert result == {unknown: ErrorCode.unknown_topic_or_partition}
            big = await groups.offsets.commit(
                OffsetCommitRequest("s", "", None, -1, {tp: (1, -1, "x" * 5000)})
            )
            assert big == {tp: ErrorCode.offset_metadata_too_large}

            a = await join_new(groups)
            await join(groups, a)
            # CompletingRebalance: the member must sync first
            assert await groups.offsets.commit(
                OffsetCommitRequest("g", a, None, 1, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.rebalance_in_progress}
            await sync(groups, "g", 1, a, None, None, None, {})
            assert await groups.offsets.commit(
                OffsetCommitRequest("g", a, None, 0, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.illegal_generation}
            assert await groups.offsets.commit(
                OffsetCommitRequest("g", "x", None, 1, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.unknown_member_id}
            assert await groups.offsets.commit(
                OffsetCommitRequest("g", "", None, -1, {tp: (1, -1, "")})
            ) == {
                tp: ErrorCode.unknown_member_id  # an active group refuses simple commits
            }
            assert await groups.offsets.commit(
                OffsetCommitRequest("g", a, None, 1, {tp: (9, -1, None)})
            ) == {tp: ErrorCode.none}
            assert groups.offsets.fetch("g", None, True) == [(tp, 9, -1, "", ErrorCode.none)]
            assert groups.offsets.fetch("g", [("t", 1)], True) == [
                (("t", 1), -1, -1, "", ErrorCode.none)
            ]
        finally:
            await close(broker, groups)

    run(scenario())


def test_transactional_offsets_pending_until_the_marker(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        tp = ("t", 0)
        number = groups.offsets_partition_for("g")
        partition = broker.logs.partition(CONSUMER_OFFSETS_TOPIC, number)
        try:
            result = await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 1000, 0, "", -1, None, {tp: (7, -1, "")})
            )
            assert result == {tp: ErrorCode.none}
            assert groups.offsets.has_pending("g", "t", 0)
            assert groups.offsets.fetch("g", [tp], True)[0][4] == ErrorCode.unstable_offset_commit
            assert groups.offsets.fetch("g", [tp], False)[0][1] == -1  # not visible yet
            partition.append_marker(1000, 0, CONTROL_COMMIT, 0)
            groups.offsets.complete_transaction(1000, True, number)
            assert not groups.offsets.has_pending("g", "t", 0)
            assert groups.offsets.fetch("g", [tp], True)[0][1] == 7

            await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 1000, 0, "", -1, None, {tp: (8, -1, "")})
            )
            partition.append_marker(1000, 0, CONTROL_ABORT, 0)
            groups.offsets.complete_transaction(1000, False, number)
            assert groups.offsets.fetch("g", [tp], True)[0][1] == 7  # the abort dropped 8

            # left pending across a restart: replay keeps it pending
            await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 2000, 0, "", -1, None, {tp: (11, -1, "")})
            )
        finally:
            await close(broker, groups)
        broker, groups = await open_coordinator(tmp_path)
        try:
            assert groups.offsets.fetch("g", [tp], False)[0][1] == 7
            assert groups.offsets.has_pending("g", "t", 0)
            partition = broker.logs.partition(CONSUMER_OFFSETS_TOPIC, number)
            partition.append_marker(2000, 0, CONTROL_COMMIT, 0)
            groups.offsets.complete_transaction(2000, True, number)
            assert groups.offsets.fetch("g", [tp], True)[0][1] == 11
        finally:
            await close(broker, groups)
        broker, groups = await open_coordinator(tmp_path)  # markers replayed too
        try:
            assert groups.offsets.fetch("g", [tp], True)[0][1] == 11
            assert not groups.offsets.has_pending("g", "t", 0)
        finally:
            await close(broker, groups)

    run(scenario())


def test_txn_offset_commit_checks_member_and_generation(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        tp = ("t", 1)
        try:
            a = await join_new(groups)
            await join(groups, a)
            await sync(groups, "g", 1, a, None, None, None, {})
            assert await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 5, 0, "who", 1, None, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.unknown_member_id}
            assert await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 5, 0, a, 0, None, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.illegal_generation}
            assert await groups.offsets.commit_transactional(
                TxnOffsetCommitRequest("g", 5, 0, a, 1, None, {tp: (1, -1, "")})
            ) == {tp: ErrorCode.none}
        finally:
            await close(broker, groups)

    run(scenario())


def test_offsets_and_groups_survive_a_restart_and_deletion_is_durable(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path)
        try:
            a = await join_new(groups, group_id="live")
            await join(groups, a, group_id="live")
            await groups.classic.sync_group(
                SyncGroupRequest("live", 1, a, None, None, None, {a: b"assigned"})
            )
            await groups.offsets.commit(
                OffsetCommitRequest("live", a, None, 1, {("t", 2): (30, 1, "x")})
            )
            await groups.offsets.commit(
                OffsetCommitRequest("old", "", None, -1, {("t", 0): (3, -1, "")})
            )
            await groups.offsets.commit(
                OffsetCommitRequest("gone", "", None, -1, {("t", 0): (4, -1, "")})
            )
            await groups.offsets.commit(
                OffsetCommitRequest("gone", "", None, -1, {("t", 1): (4, -1, "")})
            )
            assert await groups.delete_groups(["gone", "live", "never"]) == {
                "gone": ErrorCode.none,
                "live": ErrorCode.non_empty_group,
                "never": ErrorCode.group_id_not_found,
            }
            top, results = await groups.offsets.delete("old", [("t", 0)])
            assert (top, results) == (ErrorCode.none, {("t", 0): ErrorCode.none})
            await groups.offsets.commit(
                OffsetCommitRequest("old", "", None, -1, {("t", 5): (6, -1, "")})
            )
        finally:
            await close(broker, groups)
        broker, groups = await open_coordinator(tmp_path)
        try:
            assert "gone" not in groups.groups
            assert groups.offsets.fetch("old", None, False) == [
                (("t", 5), 6, -1, "", ErrorCode.none)
            ]
            live = groups.groups["live"]
            assert (live.state, live.generation_id, live.leader_id) == (GroupState.STABLE, 1, a)
            assert live.members[a].assignment == b"assigned"
            assert groups.offsets.fetch("live", [("t", 2)], False) == [
                (("t", 2), 30, 1, "x", ErrorCode.none)
            ]
            # the member carries on with its old id and generation after the restart
            assert groups.classic.heartbeat("live", a, None, 1) == ErrorCode.none
            top, results = await groups.offsets.delete("live", [("t", 2)])
            # an active consumer group whose subscriptions cannot be read counts as subscribed
            assert (top, results) == (
                ErrorCode.none,
                {("t", 2): ErrorCode.group_subscribed_to_topic},
            )
        finally:
            await close(broker, groups)

    run(scenario())


def test_deletions_the_disk_refuses_leave_groups_and_offsets_as_they_were(
    tmp_path: Path, monkeypatch
) -> None:
    trigger = tmp_path / "fail-fsync"
    monkeypatch.setenv(FAIL_ENV, str(trigger))

    fsync = {"log.flush.policy": "always"}

    async def scenario() -> None:
        broker, groups = await open_coordinator(tmp_path / "data", **fsync)
        try:
            for group_id in ("gone", "old"):
                await commit(groups, group_id, "", None, -1, {("t", 0): (4, -1, "")})
                await commit(groups, group_id, "", None, -1, {("t", 1): (5, -1, "")})
            trigger.touch()
            # a refused coordinator write is NOT_COORDINATOR to the client, as in Kafka
            assert await groups.delete_groups(["gone"]) == {"gone": ErrorCode.not_coordinator}
            top, _ = await groups.offsets.delete("old", [("t", 0)])
            assert top == ErrorCode.not_coordinator
            for group_id in ("gone", "old"):
                assert groups.groups[group_id].state == GroupState.EMPTY
                assert [o[:2] for o in groups.offsets.fetch(group_id, None, False)] == [
                    (("t", 0), 4),
                    (("t", 1), 5),
                ]
            trigger.unlink()
            assert await groups.delete_groups(["gone"]) == {"gone": ErrorCode.none}
            assert await groups.offsets.delete("old", [("t", 0)]) == (
                ErrorCode.none,
                {("t", 0): ErrorCode.none},
            )
        finally:
            await close(broker, groups)
        broker, groups = await open_coordinator(tmp_path / "data", **fsync)
        try:
            assert "gone" not in groups.groups
            assert [o[:2] for o in groups.offsets.fetch("old", None, False)] == [(("t", 1), 5)]
        finally:
            await close(broker, groups)

    run(scenario())
