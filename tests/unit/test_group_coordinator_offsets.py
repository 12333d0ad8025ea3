"""The group coordinator's offset store, without a network: OffsetCommit's generation
rules, and transactional offsets (pending until the marker, checked against the member
and generation)."""

from __future__ import annotations

from pathlib import Path

from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.coordinator.group_requests import OffsetCommitRequest, TxnOffsetCommitRequest
from onceflow.log.batch import CONTROL_ABORT, CONTROL_COMMIT
from onceflow.protocol.errors import ErrorCode
from tests.unit.group_coordinator_helpers import close, join, join_new, open_coordinator, run, sync

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
