"""Consumer groups: the classic protocol (join, sync, heartbeat, leave, commit with the
wrong generation or member), static members, group admin, and KIP-848's
ConsumerGroupHeartbeat."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.differential import steps as s
from tests.differential.driver import Await, Step
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

C1, C2 = "c1", "c2"
T, G = "~t", "~g"


def stable(client: str = C1, group: str = G) -> list:
    return [s.topic(T, 2), *s.join_alone(client, group)]


def two_members() -> list:
    """c1 stable alone; c2 joins, c1 rejoins, both synced by the leader c1."""
    return [
        *stable(),
        s.join(C2, G, member_id="", label="join c2 (member id required)"),
        s.join(C2, G, send_only=True),
        s.group_in_state(G, "PreparingRebalance"),
        s.heartbeat(C1, G),
        s.join(C1, G, send_only=True),
        Await(C2),
        Await(C1),
        s.sync(C2, G, send_only=True),
        s.sync(C1, G, {C1: ((T, (0,)),), C2: ((T, (1,)),)}),
        Await(C2),
        s.heartbeat(C1, G),
        s.heartbeat(C2, G),
        s.describe_groups([G]),
    ]


def client_uuid(client: str) -> str:
    """A member id as a KIP-848 client makes one: a random UUID in Kafka's base64 form."""
    raw = uuid.uuid5(uuid.NAMESPACE_DNS, client).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def consumer(client: str, epoch: int | None = None, member_id: str | None = None, **kw) -> Step:
    """ConsumerGroupHeartbeat; ``member_id=""`` on a first heartbeat stands for the id
    the client generates itself (v1: a UUID the client picks)."""
    if member_id == "":
        member_id = client_uuid(client)
    return s.consumer_heartbeat(client, G, member_epoch=epoch, member_id=member_id, **kw)


SCENARIOS = scenarios(
    Scenario(
        "group lone member lifecycle",
        [
            *stable(),
            s.heartbeat(C1, G),
            s.offset_commit(C1, G, {T: [(0, 3), (1, 4)]}),
            s.offset_fetch(C1, G, {T: [0, 1]}),
            s.offset_fetch(C1, G, None),
            s.describe_groups([G]),
            s.list_groups(),
            s.leave(C1, G),
            s.describe_groups([G]),
            s.list_groups(),
            s.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group two members rebalance",
        [
            *two_members(),
            s.offset_commit(C2, G, {T: [(1, 9)]}),
            s.offset_commit(C1, G, {T: [(1, 2)]}),
            s.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group member leaves, other rebalances",
        [
            *two_members(),
            s.leave(C2, G),
            s.heartbeat(C1, G),
            s.join(C1, G),
            s.sync(C1, G, {C1: ((T, (0, 1)),)}),
            s.heartbeat(C1, G),
            s.describe_groups([G]),
        ],
    ),
    Scenario(
        "group heartbeat wrong generation",
        [
            *stable(),
            s.heartbeat(C1, G, generation_id=s.generation(C1, 1)),
            s.heartbeat(C1, G, generation_id=s.generation(C1, -1)),
            s.heartbeat(C1, G, generation_id=-1),
        ],
    ),
    Scenario(
        "group heartbeat unknown member",
        [*stable(), s.heartbeat(C1, G, member_id="nobody"), s.heartbeat(C1, G, member_id="")],
    ),
    Scenario(
        "group heartbeat unknown group",
        [s.heartbeat(C1, "~nogroup", generation_id=1, member_id="nobody")],
    ),
    Scenario(
        "group commit wrong generation",
        [
            *stable(),
            s.offset_commit(C1, G, {T: [(0, 1)]}, generation_id=s.generation(C1, 1)),
            s.offset_commit(C1, G, {T: [(0, 2)]}, generation_id=s.generation(C1, -1)),
            s.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group commit unknown member",
        [
            *stable(),
            s.offset_commit(C1, G, {T: [(0, 1)]}, member_id="nobody"),
            s.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group admin commit into a non-empty group",
        [
            *stable(),
            s.offset_commit(C2, G, {T: [(0, 1)]}, generation_id=-1, member_id=""),
            s.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group simple commit without members",
        [
            s.topic(T, 2),
            s.offset_commit(C1, G, {T: [(0, 5), (1, 6)]}, generation_id=-1, member_id=""),
            s.offset_fetch(C1, G, {T: [0, 1]}),
            s.offset_fetch(C1, G, None),
            s.describe_groups([G]),
            s.list_groups(),
        ],
    ),
    Scenario(
        "group commit unknown topic and partition",
        [
            s.topic(T),
            s.offset_commit(
                C1, G, {"~absent": [(0, 1)], T: [(4, 1)]}, generation_id=-1, member_id=""
            ),
            s.offset_fetch(C1, G, {"~absent": [0], T: [4]}),
        ],
    ),
    Scenario(
        "group commit metadata too large",
        [
            s.topic(T),
            Step(
                C1,
                8,
                {
                    "group_id": G,
                    "generation_id_or_member_epoch": -1,
                    "generation_id": -1,
                    "member_id": "",
                    "topics": [
                        {
                            "name": T,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 1,
                                    "committed_metadata": "x" * 5000,
                                }
                            ],
                        }
                    ],
                },
            ),
            s.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group commit negative offset",
        [
            s.topic(T),
            s.offset_commit(C1, G, {T: [(0, -5)]}, generation_id=-1, member_id=""),
            s.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group offset fetch unknown group",
        [
            s.topic(T),
            s.offset_fetch(C1, "~nogroup", {T: [0]}),
            s.offset_fetch(C1, "~nogroup", None),
        ],
    ),
    Scenario(
        "group commit and fetch old versions",
        [
            s.topic(T),
            *[
                s.offset_commit(C1, G, {T: [(0, v)]}, generation_id=-1, member_id="", version=v)
                for v in (2, 3, 5, 7, 8)
            ],
            *[s.offset_fetch(C1, G, {T: [0]}, version=v) for v in (1, 3, 5, 7)],
        ],
    ),
    Scenario(
        "group join session timeout out of range",
        [
            s.topic(T),
            s.join(C1, G, session_ms=10, member_id=""),
            s.join(C1, G, session_ms=3_600_000, member_id=""),
        ],
    ),
    Scenario("group join empty group id", [s.join(C1, "", member_id="")]),
    Scenario(
        "group join inconsistent protocol",
        [
            *stable(),
            s.join(C2, G, member_id="", protocol_type="connect"),
            s.join(C2, G, member_id="", protocols=("other-assignor",)),
        ],
    ),
    Scenario(
        "group join no protocols",
        [
            Step(
                C1,
                11,
                {
                    "group_id": G,
                    "session_timeout": 30000,
                    "rebalance_timeout": 30000,
                    "member_id": "",
                    "protocol_type": "consumer",
                    "protocols": [],
                },
            )
        ],
    ),
    Scenario("group join unknown member id", [s.topic(T), s.join(C1, G, member_id="made-up-id")]),
    Scenario(
        "group join old versions",
        [
            s.topic(T),
            s.join(C1, G, member_id="", version=1),
            s.sync(C1, G, {C1: ((T, (0,)),)}, version=1),
            s.heartbeat(C1, G, version=1),
            s.describe_groups([G]),
            s.leave(C1, G, version=1),
        ],
    ),
    Scenario(
        "group sync wrong generation and member",
        [
            *stable(),
            s.sync(C1, G, generation_id=s.generation(C1, 1)),
            s.sync(C1, G, generation_id=s.generation(C1)),
            Step(
                C1,
                14,
                {
                    "group_id": G,
                    "generation_id": s.generation(C1),
                    "member_id": "nobody",
                    "assignments": [],
                },
            ),
        ],
    ),
    Scenario(
        "group sync wrong protocol",
        [
            s.topic(T),
            s.join(C1, G, member_id=""),
            s.join(C1, G),
            s.sync(C1, G, {C1: ((T, (0,)),)}, protocol="roundrobin"),
        ],
    ),
    Scenario(
        "group sync unknown group",
        [
            Step(
                C1,
                14,
                {
                    "group_id": "~nogroup",
                    "generation_id": 1,
                    "member_id": "nobody",
                    "assignments": [],
                },
            )
        ],
    ),
    Scenario(
        "group leave unknown member and group",
        [
            *stable(),
            s.leave(C1, G, member_id="nobody"),
            s.leave(C1, "~nogroup", member_id="nobody"),
            s.describe_groups([G]),
        ],
    ),
    Scenario(
        "group leave twice",
        [
            *stable(),
            s.leave(C1, G),
            s.leave(C1, G),
            s.heartbeat(C1, G),
            s.offset_commit(C1, G, {T: [(0, 1)]}),
        ],
    ),
    Scenario(
        "group static member replaced",
        [
            s.topic(T),
            s.join(C1, G, instance_id="inst-1"),
            s.sync(C1, G, {C1: ((T, (0,)),)}),
            s.describe_groups([G]),
            s.join(C2, G, instance_id="inst-1"),
            s.heartbeat(C1, G),
            s.describe_groups([G]),
        ],
    ),
    Scenario(
        "group describe states",
        [*stable(), s.describe_groups([G, "~nogroup", ""]), s.leave(C1, G), s.describe_groups([G])],
    ),
    Scenario(
        "group list with filters",
        [
            *stable(),
            s.offset_commit(C2, "~g2", {T: [(0, 1)]}, generation_id=-1, member_id=""),
            s.list_groups(),
            s.list_groups(["Stable"]),
            s.list_groups(["Empty"]),
            s.list_groups(["Dead", "PreparingRebalance"]),
            s.list_groups(types=["classic"]),
            s.list_groups(types=["consumer"]),
            s.list_groups(["stable"]),
        ],
    ),
    Scenario(
        "group delete groups",
        [
            *stable(),
            s.offset_commit(C2, "~g2", {T: [(0, 1)]}, generation_id=-1, member_id=""),
            s.delete_groups([G, "~g2", "~nogroup", ""]),
            s.leave(C1, G),
            s.delete_groups([G]),
            s.describe_groups([G, "~g2"]),
            s.offset_fetch(C1, "~g2", {T: [0]}),
        ],
    ),
    Scenario(
        "group offset delete",
        [
            *stable(),
            s.offset_commit(C1, G, {T: [(0, 1), (1, 2)]}),
            s.offset_delete(G, {T: [0]}),
            s.offset_commit(
                C2, "~g2", {T: [(0, 1)], "~u": [(0, 1)]}, generation_id=-1, member_id=""
            ),
            s.offset_delete("~g2", {T: [0], "~u": [0]}),
            s.offset_fetch(C1, "~g2", {T: [0], "~u": [0]}),
            s.offset_delete("~nogroup", {T: [0]}),
            s.leave(C1, G),
            s.offset_delete(G, {T: [0, 1]}),
            s.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group find coordinator",
        [
            s.find_coordinator(G),
            s.find_coordinator("~tx", 1),
            s.find_coordinator(G, 5),
            s.find_coordinator("", 0),
            *[s.find_coordinator(G, version=v) for v in (0, 1, 2, 3, 4)],
        ],
    ),
    Scenario(
        "group find coordinator for several keys",
        [Step("admin", 10, {"key_type": 0, "coordinator_keys": [G, "~g2", ""]})],
    ),
    Scenario(
        "group session expires",
        [
            s.topic(T),
            s.join(C1, G, member_id="", session_ms=6000),
            s.join(C1, G, session_ms=6000),
            s.sync(C1, G, {C1: ((T, (0,)),)}),
            s.Pause(8.5),
            s.heartbeat(C1, G),
            s.describe_groups([G]),
        ],
    ),
    # ---- KIP-848
    Scenario(
        "consumer group join and stable",
        [
            s.topic(T, 2),
            consumer(C1, 0, member_id=""),
            consumer(C1),
            consumer(C1),
            s.offset_commit(C1, G, {T: [(0, 1)]}, generation_id=s.Var(f"{C1}.member_epoch")),
            s.offset_fetch(C1, G, {T: [0]}),
            Step(
                "admin", 69, {"group_ids": [G, "~nogroup"], "include_authorized_operations": False}
            ),
            s.list_groups(),
            s.describe_groups([G]),
        ],
    ),
    Scenario(
        "consumer group two members",
        [
            s.topic(T, 2),
            consumer(C1, 0, member_id=""),
            consumer(C2, 0, member_id=""),
            consumer(C1),
            consumer(C2),
            Step("admin", 69, {"group_ids": [G], "include_authorized_operations": False}),
        ],
    ),
    Scenario(
        "consumer group wrong epoch",
        [s.topic(T), consumer(C1, 0, member_id=""), consumer(C1, 7), consumer(C1, -2)],
    ),
    Scenario(
        "consumer group unknown member",
        [
            s.topic(T),
            consumer(C1, 1, member_id="nobody"),
            consumer(C1, 0, member_id=""),
            consumer(C2, 3, member_id="nobody"),
        ],
    ),
    Scenario(
        "consumer group leave",
        [
            s.topic(T),
            consumer(C1, 0, member_id=""),
            consumer(C1, -1),
            consumer(C1, 0, member_id=""),
            Step("admin", 69, {"group_ids": [G], "include_authorized_operations": False}),
        ],
    ),
    Scenario(
        "consumer group invalid first heartbeat",
        [
            s.topic(T),
            consumer(C1, 0, member_id="", topics=None),
            consumer(C1, 0, member_id="", rebalance_ms=-1),
            consumer(C1, 0, member_id="", assignor="nonexistent"),
        ],
    ),
    Scenario("consumer group on a classic group", [*stable(), consumer(C2, 0, member_id="")]),
    Scenario(
        "classic join on a consumer group",
        [s.topic(T), consumer(C1, 0, member_id=""), s.join(C2, G, member_id="")],
    ),
)

SCENARIOS += [  # found by the generated sequences
    Scenario(
        f"group commit with a generation to no group v{version}",
        [
            s.topic(T),
            s.offset_commit(
                C1, "~nogroup", {T: [(0, 1)]}, generation_id=1, member_id="", version=version
            ),
        ],
    )
    for version in (7, 8, 9)
]


SCENARIOS = expecting(
    SCENARIOS,
    {
        "group static member replaced": ("static-member-leader",),
        "consumer group join and stable": ("kip848-epochs-and-assignment",),
        "consumer group two members": ("kip848-epochs-and-assignment",),
        "consumer group wrong epoch": ("kip848-epochs-and-assignment",),
        "consumer group unknown member": ("kip848-epochs-and-assignment",),
        "consumer group leave": ("kip848-epochs-and-assignment",),
        "consumer group on a classic group": ("classic-consumer-group-conversion",),
        "classic join on a consumer group": ("classic-consumer-group-conversion",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
