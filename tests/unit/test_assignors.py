"""The KIP-848 server-side assignors: balance, stickiness, ranges."""

from __future__ import annotations

import uuid

from onceflow.coordinator.assignors import MemberSubscription, range_assignor, uniform

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(result: dict) -> dict[str, int]:
    return {member: sum(len(p) for p in topics.values()) for member, topics in result.items()}


def test_uniform_balances_and_keeps_what_members_have():
    members = {
        "m1": MemberSubscription(frozenset({A}), {A: {0, 1}}),
        "m2": MemberSubscription(frozenset({A}), {A: {2, 3}}),
        "m3": MemberSubscription(frozenset({A})),
    }
    result = uniform(members, {A: 4})
    assert sorted(counts(result).values()) == [1, 1, 2]
    assert result["m1"][A] <= {0, 1} and result["m2"][A] <= {2, 3}
    every = [p for topics in result.values() for p in topics.get(A, ())]
    assert sorted(every) == [0, 1, 2, 3]


def test_uniform_gives_partitions_only_to_subscribers():
    members = {"m1": MemberSubscription(frozenset({A})), "m2": MemberSubscription(frozenset({B}))}
    result = uniform(members, {A: 3, B: 1})
    assert result == {"m1": {A: {0, 1, 2}}, "m2": {B: {0}}}


def test_range_hands_out_contiguous_ranges_per_topic():
    members = {name: MemberSubscription(frozenset({A, B})) for name in ("m2", "m1", "m3")}
    result = range_assignor(members, {A: 5, B: 2})
    assert result == {"m1": {A: {0, 1}, B: {0}}, "m2": {A: {2, 3}, B: {1}}, "m3": {A: {4}}}
