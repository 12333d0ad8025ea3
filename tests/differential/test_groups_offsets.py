"""Consumer group offsets: OffsetCommit with the wrong generation or member, from an
admin into a non-empty group and into no group, unknown topics and partitions, large
metadata, negative offsets, and OffsetFetch, in old versions too."""

from __future__ import annotations

import pytest

from tests.differential import group_steps as gs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential.driver import Step
from tests.differential.group_helpers import C1, C2, G, T, stable
from tests.differential.scenario import Scenario, check, scenarios

pytestmark = pytest.mark.xdist_group("differential")

SCENARIOS = scenarios(
    Scenario(
        "group commit wrong generation",
        [
            *stable(),
            gs.offset_commit(C1, G, {T: [(0, 1)]}, generation_id=sv.generation(C1, 1)),
            gs.offset_commit(C1, G, {T: [(0, 2)]}, generation_id=sv.generation(C1, -1)),
            gs.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group commit unknown member",
        [
            *stable(),
            gs.offset_commit(C1, G, {T: [(0, 1)]}, member_id="nobody"),
            gs.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group admin commit into a non-empty group",
        [
            *stable(),
            gs.offset_commit(C2, G, {T: [(0, 1)]}, generation_id=-1, member_id=""),
            gs.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group simple commit without members",
        [
            ts.topic(T, 2),
            gs.offset_commit(C1, G, {T: [(0, 5), (1, 6)]}, generation_id=-1, member_id=""),
            gs.offset_fetch(C1, G, {T: [0, 1]}),
            gs.offset_fetch(C1, G, None),
            gs.describe_groups([G]),
            gs.list_groups(),
        ],
    ),
    Scenario(
        "group commit unknown topic and partition",
        [
            ts.topic(T),
            gs.offset_commit(
                C1, G, {"~absent": [(0, 1)], T: [(4, 1)]}, generation_id=-1, member_id=""
            ),
            gs.offset_fetch(C1, G, {"~absent": [0], T: [4]}),
        ],
    ),
    Scenario(
        "group commit metadata too large",
        [
            ts.topic(T),
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
            gs.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group commit negative offset",
        [
            ts.topic(T),
            gs.offset_commit(C1, G, {T: [(0, -5)]}, generation_id=-1, member_id=""),
            gs.offset_fetch(C1, G, {T: [0]}),
        ],
    ),
    Scenario(
        "group offset fetch unknown group",
        [
            ts.topic(T),
            gs.offset_fetch(C1, "~nogroup", {T: [0]}),
            gs.offset_fetch(C1, "~nogroup", None),
        ],
    ),
    Scenario(
        "group commit and fetch old versions",
        [
            ts.topic(T),
            *[
                gs.offset_commit(C1, G, {T: [(0, v)]}, generation_id=-1, member_id="", version=v)
                for v in (2, 3, 5, 7, 8)
            ],
            *[gs.offset_fetch(C1, G, {T: [0]}, version=v) for v in (1, 3, 5, 7)],
        ],
    ),
)

SCENARIOS += [  # found by the generated sequences
    Scenario(
        f"group commit with a generation to no group v{version}",
        [
            ts.topic(T),
            gs.offset_commit(
                C1, "~nogroup", {T: [(0, 1)]}, generation_id=1, member_id="", version=version
            ),
        ],
    )
    for version in (7, 8, 9)
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
