"""The Spark source's Arrow batches from confluent-kafka messages: each column as Spark's
Kafka schema has it, whatever the offsets' gaps and the timestamp types."""

from __future__ import annotations

import datetime

from confluent_kafka import Message

from onceflow.spark.kafka_source.reader import _Columns, run_offsets
from onceflow.spark.kafka_source.schema import arrow_schema

SCHEMA = arrow_schema(False)


def messages(offsets, kind=1):
    return [
        Message(
            topic="t", partition=3, offset=o, key=None if o % 3 == 0 else b"k%d" % o,
            value=b"v%d" % o, timestamp=(kind, 1_700_000_000_000 + o),
        )
        for o in offsets
    ]  # fmt: skip


def rows(runs):
    columns = _Columns(False)
    for run in runs:
        columns.add(run, run_offsets(run))
    assert len(columns) == sum(len(run) for run in runs)
    batch = columns.to_batch("t", 3, SCHEMA)
    assert batch.schema == SCHEMA and len(columns) == 0
    return batch.to_pylist()


def expected(run_list):
    return [
        {
            "key": m.key(), "value": m.value(), "topic": "t", "partition": 3,
            "offset": m.offset(),
            "timestamp": datetime.datetime.fromtimestamp(
                m.timestamp()[1] / 1000, datetime.UTC
            ),
            "timestampType": m.timestamp()[0] - 1,
        }
        for run in run_list
        for m in run
    ]  # fmt: skip


def test_a_run_without_gaps_has_range_offsets_and_one_with_gaps_a_list():
    assert run_offsets(messages([4, 5, 6])) == range(4, 7)
    assert run_offsets(messages([4, 6, 7])) == [4, 6, 7]


def test_runs_that_follow_each_other():
    runs = [messages(range(10, 15)), messages(range(15, 17))]
    assert rows(runs) == expected(runs)


def test_a_gap_between_runs_and_within_one():
    for runs in (
        [messages(range(10, 15)), messages(range(16, 18))],  # a commit marker between
        [messages([10, 11, 13]), messages(range(14, 16))],  # one within the first
        [messages(range(10, 12)), messages([12, 14]), messages(range(15, 17))],
    ):
        assert rows(runs) == expected(runs)


def test_timestamp_types_mixed_and_the_same():
    runs = [messages(range(0, 2), kind=1), messages(range(2, 4), kind=2)]
    assert [row["timestampType"] for row in rows(runs)] == [0, 0, 1, 1]
    runs = [messages(range(0, 3), kind=2)]
    assert [row["timestampType"] for row in rows(runs)] == [1, 1, 1]


def test_the_columns_start_afresh_after_a_batch():
    columns = _Columns(False)
    first, second = messages(range(0, 3)), messages(range(7, 9))
    columns.add(first, run_offsets(first))
    assert columns.to_batch("t", 3, SCHEMA).to_pylist() == expected([first])
    columns.add(second, run_offsets(second))
    assert columns.to_batch("t", 3, SCHEMA).to_pylist() == expected([second])
