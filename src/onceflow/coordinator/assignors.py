"""Server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Both take each member's subscribed topic ids and its current target assignment, and the
partition count of every subscribed topic, and return each member's new target.

* ``uniform`` spreads all subscribed partitions evenly and keeps each member's partitions
  where it can: members with the same subscription end with counts that differ by at most
  one; with different subscriptions each partition goes to the least loaded member that
  subscribes to it.
* ``range`` gives, topic by topic, contiguous ranges of partitions to the subscribed
  members in member id order, the first ``partitions % members`` one more (so members
  subscribed to co-partitioned topics get the same partition numbers of each).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicId = uuid.UUID
MemberAssignment = dict[TopicId, set[int]]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    topics: frozenset[TopicId]
    current: Mapping[TopicId, set[int]] = field(default_factory=dict)


Assignor = Callable[
    [Mapping[str, MemberSubscription], Mapping[TopicId, int]], dict[str, MemberAssignment]
]


def uniform(
    members: Mapping[str, MemberSubscription], partitions: Mapping[TopicId, int]
) -> dict[str, MemberAssignment]:
    result: dict[str, MemberAssignment] = {member: {} for member in members}
    if not members:
        return result
    eligible: dict[tuple[TopicId, int], list[str]] = {}
    for topic, count in sorted(partitions.items()):
        subscribers = sorted(m for m, s in members.items() if topic in s.topics)
        for number in range(count):
            if subscribers:
                eligible[(topic, number)] = subscribers
    base, extra = divmod(len(eligible), len(members))
    counts = dict.fromkeys(members, 0)
    taken: set[tuple[TopicId, int]] = set()
    leftovers: dict[str, list[tuple[TopicId, int]]] = {}

    def give(member: str, item: tuple[TopicId, int]) -> None:
        result[member].setdefault(item[0], set()).add(item[1])
        counts[member] += 1
        taken.add(item)

    for member in sorted(members):  # keep what each member has, up to the even share
        kept = sorted(
            (topic, number)
            for topic, numbers in members[member].current.items()
            for number in numbers
            if member in eligible.get((topic, number), ())
        )
        for item in kept[:base]:
            give(member, item)
        leftovers[member] = kept[base:]
    for member in sorted(members):  # and one more for as many members as the remainder
        if extra and leftovers[member]:
            give(member, leftovers[member][0])
            extra -= 1
    for item, subscribers in eligible.items():
        if item not in taken:
            give(min(subscribers, key=lambda m: (counts[m], m)), item)
    return result


def range_assignor(
    members: Mapping[str, MemberSubscription], partitions: Mapping[TopicId, int]
) -> dict[str, MemberAssignment]:
    result: dict[str, MemberAssignment] = {member: {} for member in members}
    for topic, count in sorted(partitions.items()):
        subscribers = sorted(m for m, s in members.items() if topic in s.topics)
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = share + (1 if index < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
