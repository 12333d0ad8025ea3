"""The group coordinator on disk: offsets and groups survive a restart, a deletion is
durable, and deletions the disk refuses leave groups and offsets as they were."""

from __future__ import annotations

from pathlib import Path

from onceflow.coordinator.group_metadata import GroupState
from onceflow.coordinator.group_requests import OffsetCommitRequest, SyncGroupRequest
from onceflow.log.durability import FAIL_ENV
from onceflow.protocol.errors import ErrorCode
from tests.unit.group_coordinator_helpers import (
    close,
    commit,
    join,
    join_new,
    open_coordinator,
    run,
)


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
