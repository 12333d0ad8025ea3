"""Consumer groups, KIP-848's ConsumerGroupHeartbeat: joining, two members, wrong epochs,
unknown members, leaving, invalid first heartbeats, and classic and consumer groups
meeting."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.differential import group_steps as gs
from tests.differential import topic_steps as ts
from tests.differential.driver import Step, Var
from tests.differential.group_helpers import C1, C2, G, T, stable
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")


def client_uuid(client: str) -> str:
    """A member id as a KIP-848 client makes one: a random UUID in Kafka's base64 form."""
    raw = uuid.uuid5(uuid.NAMESPACE_DNS, client).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def consumer(client: str, epoch: int | None = None, member_id: str | None = None, **kw) -> Step:
    """ConsumerGroupHeartbeat; ``member_id=""`` on a first heartbeat stands for the id
    the client generates itself (v1: a UUID the client picks)."""
    if member_id == "":
        member_id = client_uuid(client)
    return gs.consumer_heartbeat(client, G, member_epoch=epoch, member_id=member_id, **kw)


SCENARIOS = scenarios(
    # ---- KIP-848
    Scenario(
        "consumer group join and stable",
        [
            ts.topic(T, 2),
            consumer(C1, 0, member_id=""),
            consumer(C1),
            consumer(C1),
            gs.offset_commit(C1, G, {T: [(0, 1)]}, generation_id=Var(f"{C1}.member_epoch")),
            gs.offset_fetch(C1, G, {T: [0]}),
            Step(
                "admin", 69, {"group_ids": [G, "~nogroup"], "include_authorized_operations": False}
            ),
            gs.list_groups(),
            gs.describe_groups([G]),
        ],
    ),
    Scenario(
        "consumer group two members",
        [
            ts.topic(T, 2),
            consumer(C1, 0, member_id=""),
            consumer(C2, 0, member_id=""),
            consumer(C1),
            consumer(C2),
            Step("admin", 69, {"group_ids": [G], "include_authorized_operations": False}),
        ],
    ),
    Scenario(
        "consumer group wrong epoch",
        [ts.topic(T), consumer(C1, 0, member_id=""), consumer(C1, 7), consumer(C1, -2)],
    ),
    Scenario(
        "consumer group unknown member",
        [
            ts.topic(T),
            consumer(C1, 1, member_id="nobody"),
            consumer(C1, 0, member_id=""),
            consumer(C2, 3, member_id="nobody"),
        ],
    ),
    Scenario(
        "consumer group leave",
        [
            ts.topic(T),
            consumer(C1, 0, member_id=""),
            consumer(C1, -1),
            consumer(C1, 0, member_id=""),
            Step("admin", 69, {"group_ids": [G], "include_authorized_operations": False}),
        ],
    ),
    Scenario(
        "consumer group invalid first heartbeat",
        [
            ts.topic(T),
            consumer(C1, 0, member_id="", topics=None),
            consumer(C1, 0, member_id="", rebalance_ms=-1),
            consumer(C1, 0, member_id="", assignor="nonexistent"),
        ],
    ),
    Scenario("consumer group on a classic group", [*stable(), consumer(C2, 0, member_id="")]),
    Scenario(
        "classic join on a consumer group",
        [ts.topic(T), consumer(C1, 0, member_id=""), gs.join(C2, G, member_id="")],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
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
