"""Option parsing, offset JSON and micro-batch planning (pure functions, no broker)."""

from __future__ import annotations

import itertools

import pytest

from onceflow.spark.kafka_source.offsets import (
    OffsetRange,
    from_spark,
    limit_offsets,
    parse_offsets_json,
    split_ranges,
    to_json,
    to_spark,
)
from onceflow.spark.kafka_source.options import OnceflowOptionError, parse_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark_kafka_connector():
    stream = parse_options({**BASE, "subscribe": "a, b"}, batch=False)
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting_offsets == "latest"
    assert stream.isolation_level == "read_committed"
    assert stream.fail_on_data_loss is True
    assert stream.include_headers is False
    assert stream.max_offsets_per_trigger is None
    batch = parse_options({**BASE, "subscribe": "a"}, batch=True)
    assert (batch.starting_offsets, batch.ending_offsets) == ("earliest", "latest")


def test_option_names_are_case_insensitive_and_kafka_options_pass_through():
    options = parse_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "subscribePattern": "orders-.*",
            "maxOffsetsPerTrigger": "100",
            "minPartitions": "4",
            "failOnDataLoss": "false",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.fetch.max.bytes": "1048576",
        },
        batch=False,
    )
    assert options.subscription.matches("orders-eu")
    assert not options.subscription.matches("old-orders-eu")
    assert options.max_offsets_per_trigger == 100 and options.min_partitions == 4
    assert options.fail_on_data_loss is False
    assert options.kafka_config["fetch.max.bytes"] == "1048576"
    assert options.kafka_config["isolation.level"] == "read_uncommitted"


def test_assign_and_specific_offsets():
    options = parse_options(
        {
            **BASE,
            "assign": '{"a":[1,0],"b":[2]}',
            "startingOffsets": '{"a":{"0":5,"1":-2},"b":{"2":-1}}',
        },
        batch=False,
    )
    assert options.subscription.assignment == (("a", 0), ("a", 1), ("b", 2))
    assert options.starting_offsets == {("a", 0): 5, ("a", 1): -2, ("b", 2): -1}


@pytest.mark.parametrize(
    ("options", "batch", "message"),
    [
        ({"subscribe": "a"}, False, "'kafka.bootstrap.servers' must be set"),
        ({**BASE}, False, "exactly one of"),
        ({**BASE, "subscribe": "a", "subscribePattern": "a"}, False, "exactly one of"),
        ({**BASE, "subscribe": " , "}, False, "at least one topic"),
        ({**BASE, "subscribePattern": "("}, False, "not a valid regular expression"),
        ({**BASE, "assign": "[1]"}, False, "'assign' must be JSON"),
        ({**BASE, "assign": '{"a":["x"]}'}, False, "non-negative integers"),
        ({**BASE, "subscribe": "a", "startingOffsets": "newest"}, False, "startingOffsets"),
        ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, False, "not an integer"),
        ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, False, "invalid"),
        ({**BASE, "subscribe": "a", "startingOffsets": '{"b":{"0":1}}'}, False, "not read: b"),
        ({**BASE, "subscribe": "a", "startingOffsets": "latest"}, True, "not allowed for batch"),
        ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, True, "not allowed"),
        ({**BASE, "subscribe": "a", "endingOffsets": "earliest"}, True, "not allowed for batch"),
        ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, False, "only for batch"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, False, "positive integer"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "x"}, False, "positive integer"),
        ({**BASE, "subscribe": "a", "minPartitions": "-1"}, False, "positive integer"),
        ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "true or false"),
        ({**BASE, "subscribe": "a", "kafka.isolation.level": "dirty"}, False, "read_committed"),
        ({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, False, "starting"),
        ({**BASE, "subscribe": "a", "kafka.enable.auto.commit": "true"}, False, "not supported"),
        ({**BASE, "subscribe": "a", "kafka.value.deserializer": "x"}, False, "binary"),
        ({**BASE, "subscribe": "a", "startingTimestamp": "1"}, False, "not supported"),
        ({**BASE, "subscribe": "a", "bootstrap.servers": "x"}, False, "'kafka.' prefix"),
        ({**BASE, "subscribe": "a", "commitOffsetsToGroup": "true"}, False, "kafka.group.id"),
    ],
)
def test_bad_options(options, batch, message):
    with pytest.raises(OnceflowOptionError, match=message):
        parse_options(options, batch=batch)


def test_offset_json_round_trip_uses_string_partition_keys():
    offsets = {("b", 10): 7, ("a", 2): 1, ("a", 0): 42}
    assert to_spark(offsets) == {"a": {"0": 42, "2": 1}, "b": {"10": 7}}
    assert from_spark(to_spark(offsets)) == offsets
    assert parse_offsets_json(to_json(offsets)) == offsets
    with pytest.raises(ValueError):
        from_spark({"a": {"0": "42"}})


def test_limit_offsets_is_proportional_exact_and_always_progresses():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 60, ("t", 1): 130, ("t", 2): 15}  # backlog 60 + 30 + 10 = 100
    limited = limit_offsets(start, end, 10)
    assert limited == {("t", 0): 6, ("t", 1): 103, ("t", 2): 6}
    assert sum(limited[tp] - start[tp] for tp in start) == 10
    # limit smaller than the number of partitions: still exactly the limit
    tiny = limit_offsets(start, end, 1)
    assert sum(tiny[tp] - start[tp] for tp in start) == 1
    # everything fits: unchanged
    assert limit_offsets(start, end, 1000) == end


def test_split_ranges_for_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 5, 15), OffsetRange("t", 2, 3, 3)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges dropped
    pieces = split_ranges(ranges, 10)
    assert len(pieces) == 10
    assert sum(p.size for p in pieces) == 100
    for partition in (0, 1):
        own = [p for p in pieces if p.partition == partition]
        assert own[0].start == ranges[partition].start and own[-1].end == ranges[partition].end
        assert all(a.end == b.start for a, b in itertools.pairwise(own))
    assert split_ranges([OffsetRange("t", 0, 0, 2)], 8) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
    ]
