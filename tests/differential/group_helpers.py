"""Shorthands of the consumer group scenarios: their consumers, topic and group, and a
lone member's way into a stable group."""

from __future__ import annotations

from tests.differential import group_steps as gs
from tests.differential import topic_steps as ts

C1, C2 = "c1", "c2"
T, G = "~t", "~g"


def stable(client: str = C1, group: str = G) -> list:
    return [ts.topic(T, 2), *gs.join_alone(client, group)]
