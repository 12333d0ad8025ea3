"""Step builders for the scenarios: one function per request a client sends, taking
the scenario's names (``~t``) and placeholders, returning driver steps."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from typing import Any

from tests.differential.driver import Await, Pause, Step, Var
from tests.differential.records import Batch

ADMIN = "admin"
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass(frozen=True)
class TopicId:
    """The id this broker gave topic ``name`` (learnt from Metadata or CreateTopics)."""

    name: str

    def resolve_on(self, side: Any) -> Any:
        import uuid

        return side.variables.get(f"topic_id:{side.resolve(self.name)}", uuid.UUID(int=0))


@dataclass(frozen=True)
class Subscription:
    """ConsumerProtocolSubscription v0 bytes naming these topics."""

    topics: tuple[str, ...]

    def resolve_on(self, side: Any) -> bytes:
        names = [side.resolve(name).encode() for name in self.topics]
        body = struct.pack(">hi", 0, len(names))
        for name in names:
            body += struct.pack(">h", len(name)) + name
        return body + struct.pack(">i", -1)


@dataclass(frozen=True)
class Assignment:
    """ConsumerProtocolAssignment v0 bytes: topic -> partitions."""

    partitions: tuple[tuple[str, tuple[int, ...]], ...]

    def resolve_on(self, side: Any) -> bytes:
        body = struct.pack(">hi", 0, len(self.partitions))
        for topic, numbers in self.partitions:
            name = side.resolve(topic).encode()
            body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(numbers))
            body += b"".join(struct.pack(">i", n) for n in numbers)
        return body + struct.pack(">i", -1)


def pid(client: str) -> Var:
    return Var(f"{client}.pid")


def epoch(client: str, offset: int = 0) -> Var:
    return Var(f"{client}.epoch", offset)


def member(client: str) -> Var:
    return Var(f"{client}.member")


def generation(client: str, offset: int = 0) -> Var:
    return Var(f"{client}.gen", offset)


# ------------------------------------------------------------------------------ topics


def metadata(
    topics: list[str] | None, client: str = ADMIN, auto_create: bool = False, **kw
) -> Step:
    return Step(
        client,
        3,
        {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": auto_create,
        },
        **kw,
    )


def topic_ready(topics: list[str], partitions: int | None = None) -> Step:
    """Wait until the broker's metadata has each topic with a leader for every partition."""

    def ready(response: Any) -> bool:
        for topic in response.topics:
            if topic.error_code != 0 or not topic.partitions:
                return False
            if partitions is not None and len(topic.partitions) != partitions:
                return False
            if any(p.leader_id < 0 or p.error_code != 0 for p in topic.partitions):
                return False
        return True

    step = metadata(topics, compare=False, label="topic ready")
    step.wait_until = ready
    return step


def partitions_led(topic_name: str, partitions: int) -> Step:
    """Wait until the broker leads every partition of the topic (Kafka's replica manager
    takes leadership a moment after the metadata names the leader)."""
    step = Step(
        ADMIN,
        2,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": topic_name,
                    "partitions": [
                        {"partition_index": p, "timestamp": EARLIEST} for p in range(partitions)
                    ],
                }
            ],
        },
        compare=False,
        label="partitions led",
    )
    step.wait_until = lambda r: all(p.error_code == 0 for t in r.topics for p in t.partitions)
    return step


_barriers = itertools.count()


def metadata_barrier() -> list[Step]:
    """Create a topic and wait until the broker knows it: Kafka's broker applies the
    controller's metadata records in order, so a config change made before is applied by
    then (AlterConfigs answers once the controller has it, the broker learns it later)."""
    steps = create_topics([f"~sync{next(_barriers)}"])
    for step in steps:
        step.compare = False
    return steps


def topic_gone(topics: list[str]) -> Step:
    step = metadata(topics, compare=False, label="topic deleted")
    step.wait_until = lambda r: all(t.error_code == 3 for t in r.topics)
    return step


def create_topics(
    topics: list[tuple[str, int, int]] | list[str],
    configs: dict[str, str | None] | None = None,
    validate_only: bool = False,
    version: int | None = None,
    assignments: list[dict] | None = None,
    wait: bool = True,
) -> list[Step]:
    entries = []
    names = []
    for topic in topics:
        name, partitions, replication = (topic, 1, 1) if isinstance(topic, str) else topic
        names.append(name)
        entries.append(
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication,
                "assignments": assignments or [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        )
    steps = [
        Step(
            ADMIN,
            19,
            {"topics": entries, "validate_only": validate_only, "timeout": 10000},
            version,
        )
    ]
    if wait and not validate_only:
        steps.append(topic_ready(names))
        steps += [
            partitions_led(e["name"], max(e["num_partitions"], len(e["assignments"]), 1))
            for e in entries
        ]
    return steps


def topic(
    name: str = "~t", partitions: int = 1, configs: dict[str, str | None] | None = None
) -> list[Step]:
    """Set-up: create a topic and wait for it. Its CreateTopics answer is not compared
    (the admin scenarios compare those); what later steps see of it is."""
    steps = create_topics([(name, partitions, 1)], configs)
    steps[0].compare = False
    steps[0].label = "set-up: create topic"
    return steps


def delete_topics(names: list[str], version: int | None = None, wait: bool = True) -> list[Step]:
    steps = [
        Step(
            ADMIN,
            20,
            {
                "topic_names": names,
                "topics": [{"name": n, "topic_id": None} for n in names],
                "timeout": 10000,
            },
            version,
        )
    ]
    if wait:
        steps.append(topic_gone(names))
    return steps


def create_partitions(name: str, count: int, validate_only: bool = False) -> list[Step]:
    steps = [
        Step(
            ADMIN,
            37,
            {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": 10000,
                "validate_only": validate_only,
            },
        )
    ]
    return steps


# ----------------------------------------------------------------------------- produce


def produce(
    client: str,
    topic_name: str,
    batch: Batch | None,
    partition: int = 0,
    acks: int = -1,
    transactional_id: str | None = None,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        0,
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout": 10000,
            "topic_data": [
                {"name": topic_name, "partition_data": [{"index": partition, "records": batch}]}
            ],
        },
        version,
        label=label,
        wait_until=None if acks == 0 else not_leader_free,
    )


def not_leader_free(response: Any) -> bool:
    """Kafka answers NOT_LEADER_OR_FOLLOWER, with nothing appended, while the transaction
    verification cannot reach the coordinator yet; a producer sends again, so does this."""
    if isinstance(response, dict):
        return True
    return all(p.error_code != 6 for t in response.responses for p in t.partition_responses)


def barrier(client: str) -> Step:
    """A Metadata request for no topic on ``client``'s connection: a broker serves one
    connection's requests in order, so what the client sent before (an acks=0 produce,
    which has no answer) was handled when this is answered (durable is another matter:
    onceflow's high watermark waits for the fsync); Kafka closes the connection instead
    when that produce failed."""
    return Step(client, 3, {"topics": [], "allow_auto_topic_creation": False}, label="barrier")


def batch(
    *values: bytes,
    producer: str | None = None,
    sequence: int = -1,
    transactional: bool = False,
    **kw,
) -> Batch:
    return Batch(tuple(values), producer, sequence, transactional, **kw)


def fetch(
    client: str,
    topic_name: str,
    offset: int = 0,
    partition: int = 0,
    isolation: int = READ_UNCOMMITTED,
    max_bytes: int = 1 << 20,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        1,
        {
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": max_bytes,
            "isolation_level": isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic_name,
                    "topic_id": TopicId(topic_name),
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": max_bytes,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        version,
        label=label,
    )


def list_offsets(
    client: str,
    topic_name: str,
    timestamp: int = LATEST,
    partition: int = 0,
    isolation: int = READ_UNCOMMITTED,
    version: int | None = None,
    label: str = "",
) -> Step:
    return Step(
        client,
        2,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [
                {
                    "name": topic_name,
                    "partitions": [
                        {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1}
                    ],
                }
            ],
        },
        version,
        label=label,
    )


def offsets_view(client: str, topic_name: str, partition: int = 0) -> list[Step]:
    """What a reader sees: ListOffsets earliest/latest/LSO and both fetch isolations."""
    return [
        list_offsets(client, topic_name, EARLIEST, partition, label="earliest"),
        list_offsets(client, topic_name, LATEST, partition, label="latest (HW)"),
        list_offsets(
            client, topic_name, LATEST, partition, READ_COMMITTED, label="latest committed (LSO)"
        ),
        fetch(client, topic_name, 0, partition, READ_UNCOMMITTED, label="fetch read_uncommitted"),
        fetch(client, topic_name, 0, partition, READ_COMMITTED, label="fetch read_committed"),
    ]


# ------------------------------------------------------------------------ transactions


def init_producer_id(
    client: str,
    transactional_id: str | None = None,
    timeout_ms: int = 60000,
    with_epoch: bool = False,
    version: int | None = None,
    label: str = "",
) -> Step:
    """InitProducerId, repeated while the broker answers COORDINATOR_LOAD_IN_PROGRESS (a
    new block of producer ids is on its way) or CONCURRENT_TRANSACTIONS (the previous
    transaction is still being completed), as every client does; the last answer counts."""
    return Step(
        client,
        22,
        {
            "transactional_id": transactional_id,
            "transaction_timeout": timeout_ms,
            "producer_id": pid(client) if with_epoch else -1,
            "producer_epoch": epoch(client) if with_epoch else -1,
        },
        version,
        label=label or f"init producer id {client}",
        wait_until=lambda r: r.error_code not in (14, 51),
    )


def add_partitions(
    client: str, transactional_id: str, topics: dict[str, list[int]], version: int = 3
) -> Step:
    return Step(
        client,
        24,
        {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": pid(client),
            "v3_and_below_producer_epoch": epoch(client),
            "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()],
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client),
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
        },
        version,
    )


def add_offsets(client: str, transactional_id: str, group: str, epoch_offset: int = 0) -> Step:
    return Step(
        client,
        25,
        {
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "group_id": group,
        },
    )


def _committed(
    offsets: dict[str, list[tuple[int, int]]], metadata: str, **fields: Any
) -> list[dict[str, Any]]:
    """The topics of OffsetCommit and TxnOffsetCommit: each (partition, offset) with no
    leader epoch, this metadata and any other ``fields``."""
    return [
        {
            "name": t,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": o,
                    "committed_leader_epoch": -1,
                    "committed_metadata": metadata,
                    **fields,
                }
                for p, o in parts
            ],
        }
        for t, parts in offsets.items()
    ]


def txn_offset_commit(
    client: str,
    transactional_id: str,
    group: str,
    offsets: dict[str, list[tuple[int, int]]],
    generation_id: Any = -1,
    member_id: Any = "",
    epoch_offset: int = 0,
    version: int | None = None,
) -> Step:
    return Step(
        client,
        28,
        {
            "transactional_id": transactional_id,
            "group_id": group,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": _committed(offsets, ""),
        },
        version,
    )


def end_txn(
    client: str,
    transactional_id: str,
    commit: bool,
    epoch_offset: int = 0,
    version: int | None = None,
) -> Step:
    return Step(
        client,
        26,
        {
            "transactional_id": transactional_id,
            "producer_id": pid(client),
            "producer_epoch": epoch(client, epoch_offset),
            "committed": commit,
        },
        version,
        label="commit" if commit else "abort",
    )


def describe_transactions(ids: list[str], client: str = ADMIN, **kw) -> Step:
    return Step(client, 65, {"transactional_ids": ids}, **kw)


def txn_settled(transactional_id: str) -> Step:
    """Wait until the transaction's markers are written (Kafka writes them after it
    answers EndTxn: the state leaves PrepareCommit/PrepareAbort/PrepareEpochFence); the
    answer itself is not compared."""
    step = describe_transactions([transactional_id], compare=False, label="markers written")
    step.wait_until = lambda r: not r.transaction_states[0].transaction_state.startswith("Prepare")
    return step


def end_and_settle(client: str, transactional_id: str, commit: bool) -> list[Step]:
    return [end_txn(client, transactional_id, commit), txn_settled(transactional_id)]


def describe_producers(topic_name: str, partitions: list[int] | None = None) -> Step:
    return Step(
        ADMIN, 61, {"topics": [{"name": topic_name, "partition_indexes": partitions or [0]}]}
    )


def list_transactions(
    states: list[str] | None = None, pids: list[Any] | None = None, duration: int = -1
) -> Step:
    return Step(
        ADMIN,
        66,
        {
            "state_filters": states or [],
            "producer_id_filters": pids or [],
            "duration_filter": duration,
        },
    )


# ------------------------------------------------------------------------------ groups


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
            "topics": _committed(offsets, "m", commit_timestamp=-1),
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


__all__ = ["Await", "Batch", "Pause", "Step", "Var"]
