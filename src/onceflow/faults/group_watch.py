"""Watch the pipeline's consumer groups from outside: who owns what, and has a group
rebalanced without a member a fault took away?

A worker cut off from its group coordinator is a zombie only once the rest of its group
owns its partitions: until then nobody else writes what it writes. The classic protocol
tells the other members on their next heartbeat (``heartbeat.interval.ms``, 3 s by
default), KIP-848 on theirs (5 s), so a cut that lasts a fixed few seconds may end before
the group moved on; a cut that lasts until ``moved_on`` does not. Members are told apart
by their host: each worker's proxy connects to the broker from an address of its own.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from onceflow.faults.probe import OWN_GROUP_PREFIX

REQUEST_TIMEOUT_S = 5.0
LOOK_S = 0.1  # how often a wait looks again

Partitions = frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class GroupShape:
    """A group's members (host, what it owns) and whether it is stable."""

    members: tuple[tuple[str, Partitions], ...]
    stable: bool

    @property
    def owned(self) -> Partitions:
        return frozenset().union(*(owned for _, owned in self.members))

    @property
    def hosts(self) -> set[str]:
        return {host for host, _ in self.members}

    def owns(self, host: str) -> bool:
        return any(owned for member, owned in self.members if member == host)


class GroupWatch:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})

    def shapes(self) -> dict[str, GroupShape]:
        """Every consumer group but onceflow's own, by id (empty when the broker does not
        answer: the caller only waits less)."""
        from confluent_kafka import ConsumerGroupState, KafkaException

        try:
            listings = self._admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S)
            ids = [g.group_id for g in listings.result().valid
                   if not g.group_id.startswith(OWN_GROUP_PREFIX)]  # fmt: skip
            if not ids:
                return {}
            found = self._admin.describe_consumer_groups(ids, request_timeout=REQUEST_TIMEOUT_S)
            shapes = {}
            for group, future in found.items():
                description: Any = future.result()
                members = tuple(
                    (member.host.lstrip("/"), _owned(member)) for member in description.members
                )
                stable = description.state == ConsumerGroupState.STABLE
                shapes[group] = GroupShape(members, stable or not members)
            return shapes
        except KafkaException:
            return {}

    def settled(self, within_s: float, hosts: Collection[str] = ()) -> dict[str, GroupShape]:
        """The groups once every one is stable and has a member from each of ``hosts`` if
        any has members (or as they are after ``within_s``)."""
        deadline = time.monotonic() + within_s
        while True:
            shapes = self.shapes()
            present = set().union(*(shape.hosts for shape in shapes.values()))
            stable = all(shape.stable for shape in shapes.values())
            if (stable and (not present or present >= set(hosts))) or time.monotonic() > deadline:
                return shapes
            time.sleep(LOOK_S)

    def moved_on(self, before: dict[str, GroupShape], host: str | None) -> bool:
        """Has a group that had the member from ``host`` in ``before`` lost it and, if any
        members are left, rebalanced so that they own at least what the group owned then?
        (``host`` None: any member.)"""
        now = self.shapes()
        for group, then in before.items():
            shape = now.get(group)
            if shape is None or not then.members or (host is not None and host not in then.hosts):
                continue
            gone = len(shape.members) < len(then.members) if host is None else (
                host not in shape.hosts
            )  # fmt: skip
            if gone and (not shape.members or (shape.stable and shape.owned >= then.owned)):
                return True
        return False


def _owned(member: Any) -> Partitions:
    assignment = member.assignment
    if not assignment:
        return frozenset()
    return frozenset((tp.topic, tp.partition) for tp in assignment.topic_partitions)


def consuming_groups(bootstrap: str) -> dict[str, set[str]]:
    """The consumer groups with members, and the topics their members are assigned."""
    return {
        group: {topic for topic, _ in shape.owned}
        for group, shape in GroupWatch(bootstrap).shapes().items()
        if shape.members
    }
