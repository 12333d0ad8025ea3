"""Consumer groups, the classic protocol: a lone member and two members rebalancing,
JoinGroup, SyncGroup, Heartbeat and LeaveGroup with the wrong generation, member, group
or protocol, old versions, static members, and an expiring session."""

from __future__ import annotations

import pytest

from tests.differential import group_steps as gs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential.driver import Await, Pause, Step
from tests.differential.group_helpers import C1, C2, G, T, stable
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")


def two_members() -> list:
    """c1 stable alone; c2 joins, c1 rejoins, both synced by the leader c1."""
    return [
        *stable(),
        gs.join(C2, G, member_id="", label="join c2 (member id required)"),
        gs.join(C2, G, send_only=True),
        gs.group_in_state(G, "PreparingRebalance"),
        gs.heartbeat(C1, G),
        gs.join(C1, G, send_only=True),
        Await(C2),
        Await(C1),
        gs.sync(C2, G, send_only=True),
        gs.sync(C1, G, {C1: ((T, (0,)),), C2: ((T, (1,)),)}),
        Await(C2),
        gs.heartbeat(C1, G),
        gs.heartbeat(C2, G),
        gs.describe_groups([G]),
    ]


SCENARIOS = scenarios(
    Scenario(
        "group lone member lifecycle",
        [
            *stable(),
            gs.heartbeat(C1, G),
            gs.offset_commit(C1, G, {T: [(0, 3), (1, 4)]}),
            gs.offset_fetch(C1, G, {T: [0, 1]}),
            gs.offset_fetch(C1, G, None),
            gs.describe_groups([G]),
            gs.list_groups(),
            gs.leave(C1, G),
            gs.describe_groups([G]),
            gs.list_groups(),
            gs.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group two members rebalance",
        [
            *two_members(),
            gs.offset_commit(C2, G, {T: [(1, 9)]}),
            gs.offset_commit(C1, G, {T: [(1, 2)]}),
            gs.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group member leaves, other rebalances",
        [
            *two_members(),
            gs.leave(C2, G),
            gs.heartbeat(C1, G),
            gs.join(C1, G),
            gs.sync(C1, G, {C1: ((T, (0, 1)),)}),
            gs.heartbeat(C1, G),
            gs.describe_groups([G]),
        ],
    ),
    Scenario(
        "group heartbeat wrong generation",
        [
            *stable(),
            gs.heartbeat(C1, G, generation_id=sv.generation(C1, 1)),
            gs.heartbeat(C1, G, generation_id=sv.generation(C1, -1)),
            gs.heartbeat(C1, G, generation_id=-1),
        ],
    ),
    Scenario(
        "group heartbeat unknown member",
        [*stable(), gs.heartbeat(C1, G, member_id="nobody"), gs.heartbeat(C1, G, member_id="")],
    ),
    Scenario(
        "group heartbeat unknown group",
        [gs.heartbeat(C1, "~nogroup", generation_id=1, member_id="nobody")],
    ),
    Scenario(
        "group join session timeout out of range",
        [
            ts.topic(T),
            gs.join(C1, G, session_ms=10, member_id=""),
            gs.join(C1, G, session_ms=3_600_000, member_id=""),
        ],
    ),
    Scenario("group join empty group id", [gs.join(C1, "", member_id="")]),
    Scenario(
        "group join inconsistent protocol",
        [
            *stable(),
            gs.join(C2, G, member_id="", protocol_type="connect"),
            gs.join(C2, G, member_id="", protocols=("other-assignor",)),
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
    Scenario("group join unknown member id", [ts.topic(T), gs.join(C1, G, member_id="made-up-id")]),
    Scenario(
        "group join old versions",
        [
            ts.topic(T),
            gs.join(C1, G, member_id="", version=1),
            gs.sync(C1, G, {C1: ((T, (0,)),)}, version=1),
            gs.heartbeat(C1, G, version=1),
            gs.describe_groups([G]),
            gs.leave(C1, G, version=1),
        ],
    ),
    Scenario(
        "group sync wrong generation and member",
        [
            *stable(),
            gs.sync(C1, G, generation_id=sv.generation(C1, 1)),
            gs.sync(C1, G, generation_id=sv.generation(C1)),
            Step(
                C1,
                14,
                {
                    "group_id": G,
                    "generation_id": sv.generation(C1),
                    "member_id": "nobody",
                    "assignments": [],
                },
            ),
        ],
    ),
    Scenario(
        "group sync wrong protocol",
        [
            ts.topic(T),
            gs.join(C1, G, member_id=""),
            gs.join(C1, G),
            gs.sync(C1, G, {C1: ((T, (0,)),)}, protocol="roundrobin"),
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
            gs.leave(C1, G, member_id="nobody"),
            gs.leave(C1, "~nogroup", member_id="nobody"),
            gs.describe_groups([G]),
        ],
    ),
    Scenario(
        "group leave twice",
        [
            *stable(),
            gs.leave(C1, G),
            gs.leave(C1, G),
            gs.heartbeat(C1, G),
            gs.offset_commit(C1, G, {T: [(0, 1)]}),
        ],
    ),
    Scenario(
        "group static member replaced",
        [
            ts.topic(T),
            gs.join(C1, G, instance_id="inst-1"),
            gs.sync(C1, G, {C1: ((T, (0,)),)}),
            gs.describe_groups([G]),
            gs.join(C2, G, instance_id="inst-1"),
            gs.heartbeat(C1, G),
            gs.describe_groups([G]),
        ],
    ),
    Scenario(
        "group session expires",
        [
            ts.topic(T),
            gs.join(C1, G, member_id="", session_ms=6000),
            gs.join(C1, G, session_ms=6000),
            gs.sync(C1, G, {C1: ((T, (0,)),)}),
            Pause(8.5),
            gs.heartbeat(C1, G),
            gs.describe_groups([G]),
        ],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
        "group static member replaced": ("static-member-leader",),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
