"""The group coordinator's pure parts, without a network: Java's string hash that picks
the offsets partition, the round trip of its record formats and of the consumer
protocol's bytes, and the choice of a group's protocol by the members' votes."""

from __future__ import annotations

from onceflow.coordinator.group_log import java_string_hash, kafka_abs
from onceflow.coordinator.group_metadata import Group, GroupState, Member
from onceflow.coordinator.group_records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    assigned_partitions,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
    subscribed_topics,
)

# -- pure helpers ---------------------------------------------------------------------------


def test_java_string_hash_and_offsets_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(java_string_hash("polygenelubricants")) == 0
    assert java_string_hash("é") == 233  # UTF-16 code units, not UTF-8 bytes
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two code units


def test_record_formats_round_trip() -> None:
    assert parse_key(offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert parse_key(group_key("g")) == GroupKey("g")
    value = OffsetValue(42, 7, "meta", 1234)
    assert parse_offset_value(offset_value(value)) == value
    group = GroupValue(
        "consumer",
        5,
        "range",
        "m1",
        99,
        [MemberRecord("m1", "i1", "c", "/h", 300, 10, b"sub", b"asg")],
    )
    assert parse_group_value(group_value(group)) == group
    # the consumer protocol: version 0 subscription [t1, t2] and assignment {t1: [0, 2]}
    subscription = b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x02t1" + b"\x00\x02t2" + b"\xff" * 4
    assert subscribed_topics(subscription) == {"t1", "t2"}
    assignment = (
        b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x02t1" + b"\x00\x00\x00\x02"
    ) + b"\x00\x00\x00\x00\x00\x00\x00\x02"
    assert assigned_partitions(assignment) == {"t1": [0, 2]}
    assert subscribed_topics(b"\x01") is None


def member(member_id: str, protocols: list[str]) -> Member:
    return Member(member_id, None, "c", "/h", 1000, 1000, "consumer", [(p, b"") for p in protocols])


def test_protocol_selection_by_votes_among_common_protocols() -> None:
    group = Group("g", GroupState.PREPARING_REBALANCE)
    group.add(member("a", ["roundrobin", "range", "sticky"]))
    group.add(member("b", ["range", "roundrobin"]))
    group.add(member("c", ["range", "roundrobin"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"  # two votes against one
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])
    empty = Group("e")
    assert not empty.supports_protocols("", ["range"])
    assert not empty.supports_protocols("consumer", [])
