"""Consumer group admin: DescribeGroups, ListGroups with filters, DeleteGroups,
OffsetDelete and FindCoordinator."""

from __future__ import annotations

import pytest

from tests.differential import group_steps as gs
from tests.differential.driver import Step
from tests.differential.group_helpers import C1, C2, G, T, stable
from tests.differential.scenario import Scenario, check, scenarios

pytestmark = pytest.mark.xdist_group("differential")

SCENARIOS = scenarios(
    Scenario(
        "group describe states",
        [
            *stable(),
            gs.describe_groups([G, "~nogroup", ""]),
            gs.leave(C1, G),
            gs.describe_groups([G]),
        ],
    ),
    Scenario(
        "group list with filters",
        [
            *stable(),
            gs.offset_commit(C2, "~g2", {T: [(0, 1)]}, generation_id=-1, member_id=""),
            gs.list_groups(),
            gs.list_groups(["Stable"]),
            gs.list_groups(["Empty"]),
            gs.list_groups(["Dead", "PreparingRebalance"]),
            gs.list_groups(types=["classic"]),
            gs.list_groups(types=["consumer"]),
            gs.list_groups(["stable"]),
        ],
    ),
    Scenario(
        "group delete groups",
        [
            *stable(),
            gs.offset_commit(C2, "~g2", {T: [(0, 1)]}, generation_id=-1, member_id=""),
            gs.delete_groups([G, "~g2", "~nogroup", ""]),
            gs.leave(C1, G),
            gs.delete_groups([G]),
            gs.describe_groups([G, "~g2"]),
            gs.offset_fetch(C1, "~g2", {T: [0]}),
        ],
    ),
    Scenario(
        "group offset delete",
        [
            *stable(),
            gs.offset_commit(C1, G, {T: [(0, 1), (1, 2)]}),
            gs.offset_delete(G, {T: [0]}),
            gs.offset_commit(
                C2, "~g2", {T: [(0, 1)], "~u": [(0, 1)]}, generation_id=-1, member_id=""
            ),
            gs.offset_delete("~g2", {T: [0], "~u": [0]}),
            gs.offset_fetch(C1, "~g2", {T: [0], "~u": [0]}),
            gs.offset_delete("~nogroup", {T: [0]}),
            gs.leave(C1, G),
            gs.offset_delete(G, {T: [0, 1]}),
            gs.offset_fetch(C1, G, {T: [0, 1]}),
        ],
    ),
    Scenario(
        "group find coordinator",
        [
            gs.find_coordinator(G),
            gs.find_coordinator("~tx", 1),
            gs.find_coordinator(G, 5),
            gs.find_coordinator("", 0),
            *[gs.find_coordinator(G, version=v) for v in (0, 1, 2, 3, 4)],
        ],
    ),
    Scenario(
        "group find coordinator for several keys",
        [Step("admin", 10, {"key_type": 0, "coordinator_keys": [G, "~g2", ""]})],
    ),
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
