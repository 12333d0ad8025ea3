"""Step builders for consumer groups: FindCoordinator, the classic protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), OffsetCommit and OffsetFetch, the group admin APIs and
KIP-848's ConsumerGroupHeartbeat. Scenarios import this module as ``gs``."""

from __future__ import annotations

from typing import Any

from tests.differential.driver import Step, Var
from tests.differential.step_values import (
    ADMIN,
    Assignment,
    Subscription,
    committed_topics,
    generation,
    member,
)


def find_coordinator(
    key: str, key_type: int = 0, client: str = ADMIN, version: int | None = None
) -> Step:
    return Step(client, 10, {"key": key, "key_type": key_type, "coordinator_keys": [key]}, version)


def join(
    client: str,
    group: str,
    topics: tuple[str, ...] = ("~t",),
    session_ms: int = 30000,
    rebalance_ms: int = 30000,
    member_id: Any = None,
    send_only: bool = False,
    protocol_type: str = "consumer",
    protocols: tuple[str, ...] = ("range",),
    instance_id: str | None = None,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        11,
        {
            "group_id": group,
            "session_timeout": session_ms,
            "rebalance_timeout": rebalance_ms,
            "member_id": member(client) if member_id is None else member_id,
            "group_instance_id": instance_id,
            "protocol_type": protocol_type,
            "protocols": [{"name": p, "metadata": Subscription(topics)} for p in protocols],
            "reason": None,
        },
        version,
        send_only=send_only,
        label=label or f"join {client}",
    )


def sync(
    client: str,
    group: str,
    assignments: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] | None = None,
    generation_id: Any = None,
    send_only: bool = False,
    protocol: str | None = "range",
    version: int | None = None,
) -> Step:
    return Step(
        client,
        14,
        {
            "group_id": group,
            "generation_id": generation(client) if generation_id is None else generation_id,
            "member_id": member(client),
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": protocol,
            "assignments": [
                {"member_id": member(owner), "assignment": Assignment(parts)}
                for owner, parts in (assignments or {}).items()
            ],
        },
        version,
        send_only=send_only,
        label=f"sync {client}",
    )


def heartbeat(
    client: str,
    group: str,
    generation_id: Any = None,
    member_id: Any = None,
    version: int | None = None,
) -> Step:
    return Step(
        client,
        12,
        {
            "group_id": group,
            "generation_id": generation(client) if generation_id is None else generation_id,
            "member_id": member(client) if member_id is None else member_id,
            "group_instance_id": None,
        },
        version,
        label=f"heartbeat {client}",
    )


def leave(client: str, group: str, member_id: Any = None, version: int | None = None) -> Step:
    who = member(client) if member_id is None else member_id
    return Step(
        client,
        13,
        {
            "group_id": group,
            "member_id": who,
            "members": [{"member_id": who, "group_instance_id": None, "reason": None}],
        },
        version,
        label=f"leave {client}",
    )


def offset_commit(
    client: str,
    group: str,
    offsets: dict[str, list[tuple[int, int]]],
    generation_id: Any = None,
    member_id: Any = None,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation(client)
            if generation_id is None
            else generation_id,
            "generation_id": generation(client) if generation_id is None else generation_id,
            "member_id": member(client) if member_id is None else member_id,
            "group_instance_id": None,
            "retention_time": -1,
            "topics": committed_topics(offsets, "m", commit_timestamp=-1),
        },
        version,
        label=label or f"commit {client}",
    )


def offset_fetch(
    client: str,
    group: str,
    topics: dict[str, list[int]] | None,
    require_stable: bool = False,
    version: int | None = None,
) -> Step:
    topic_list = (
        None if topics is None else [{"name": t, "partition_indexes": p} for t, p in topics.items()]
    )
    return Step(
        client,
        9,
        {
            "group_id": group,
            "topics": topic_list,
            "groups": [
                {"group_id": group, "member_id": None, "member_epoch": -1, "topics": topic_list}
            ],
            "require_stable": require_stable,
        },
        version,
        label=f"offset fetch {client}",
    )


def describe_groups(groups: list[str], client: str = ADMIN) -> Step:
    return Step(client, 15, {"groups": groups, "include_authorized_operations": False})


def list_groups(states: list[str] | None = None, types: list[str] | None = None) -> Step:
    return Step(ADMIN, 16, {"states_filter": states or [], "types_filter": types or []})


def group_in_state(group: str, state: str) -> Step:
    """Wait until the group is in ``state`` (another client's request reached it)."""
    step = describe_groups([group])
    step.compare = False
    step.label = f"group {state}"
    step.wait_until = lambda r: r.groups[0].group_state == state
    return step


def delete_groups(groups: list[str]) -> Step:
    return Step(ADMIN, 42, {"groups_names": groups})


def offset_delete(group: str, topics: dict[str, list[int]]) -> Step:
    return Step(
        ADMIN,
        47,
        {
            "group_id": group,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in topics.items()
            ],
        },
    )


def join_alone(client: str, group: str, topics: tuple[str, ...] = ("~t",), **kw) -> list[Step]:
    """A lone member's way into a stable group: join for a member id, join, sync."""
    return [
        join(
            client, group, topics, member_id="", label=f"join {client} (member id required)", **kw
        ),
        join(client, group, topics, **kw),
        sync(client, group, {client: ((topics[0], (0,)),)}),
    ]


def consumer_heartbeat(
    client: str,
    group: str,
    topics: list[str] | None = ("~t",),  # type: ignore[assignment]
    member_epoch: Any = None,
    member_id: Any = None,
    rebalance_ms: int = 30000,
    assignor: str | None = None,
    owned: list[dict] | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        68,
        {
            "group_id": group,
            "member_id": member(client) if member_id is None else member_id,
            "member_epoch": Var(f"{client}.member_epoch") if member_epoch is None else member_epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": rebalance_ms,
            "subscribed_topic_names": list(topics) if topics is not None else None,
            "subscribed_topic_regex": None,
            "server_assignor": assignor,
            "topic_partitions": [] if owned is None else owned,
        },
        label=label or f"consumer heartbeat {client}",
    )
