"""The executor-side range reader and the driver-side offset reader against a real broker.

No Spark here: these drive ``read_range`` and ``OffsetReader`` directly, with gaps made by
real transactions (control records and aborted data).
"""

from __future__ import annotations

import pytest

from onceflow.spark.kafka_source.offset_reader import OffsetReader
from onceflow.spark.kafka_source.offsets import OffsetRange
from onceflow.spark.kafka_source.options import parse_options
from onceflow.spark.kafka_source.reader import OnceflowDataLossError, ReadSettings, read_range
from onceflow.spark.kafka_source.schema import arrow_schema
from tests.spark.conftest import create_topic, produce, wait_until
from tests.spark.wire_txn import WireTransactions


def read(bootstrap: str, topic: str, start: int, end: int, isolation: str, **settings):
    batches = list(
        read_range(
            OffsetRange(topic, 0, start, end),
            ReadSettings(
                {"bootstrap.servers": bootstrap, "isolation.level": isolation},
                poll_timeout_ms=settings.pop("poll_timeout_ms", 10_000),
                **settings,
            ),
        )
    )
    for batch in batches:
        assert batch.schema == arrow_schema(settings.get("include_headers", False))
    return [(row["offset"], row["value"]) for b in batches for row in b.to_pylist()], batches


@pytest.fixture
def gappy(kafka_broker, topic):
    """Offsets: 0-1 committed, 2 commit marker, 3-5 aborted, 6 abort marker, 7-8 plain."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    txn = WireTransactions(bootstrap)
    txn.send(topic, 0, [b"c0", b"c1"])
    txn.end(commit=True)
    txn.send(topic, 0, [b"a0", b"a1", b"a2"])
    txn.end(commit=False)
    txn.close()
    produce(bootstrap, topic, [b"p7", b"p8"], partition=0)
    return bootstrap, topic


@pytest.mark.parametrize("end", [2, 3, 4, 6, 7, 9])
def test_read_committed_ranges_end_in_and_after_gaps(gappy, end):
    bootstrap, topic = gappy
    rows, _ = read(bootstrap, topic, 0, end, "read_committed")
    committed = [(0, b"c0"), (1, b"c1"), (7, b"p7"), (8, b"p8")]
    assert rows == [r for r in committed if r[0] < end]


@pytest.mark.parametrize("start", [2, 3, 6, 7])
def test_read_committed_ranges_start_in_gaps(gappy, start):
    bootstrap, topic = gappy
    rows, _ = read(bootstrap, topic, start, 9, "read_committed")
    assert rows == [(o, v) for o, v in [(7, b"p7"), (8, b"p8")] if o >= start]


def test_read_uncommitted_sees_aborted_data_but_never_markers(gappy):
    bootstrap, topic = gappy
    rows, _ = read(bootstrap, topic, 0, 9, "read_uncommitted")
    assert [o for o, _ in rows] == [0, 1, 3, 4, 5, 7, 8]


def test_range_over_only_gaps_is_empty_and_quick(gappy):
    bootstrap, topic = gappy
    rows, batches = read(bootstrap, topic, 2, 7, "read_committed", poll_timeout_ms=3_000)
    assert rows == [] and batches == []


def test_batches_are_capped_by_max_records_per_batch(kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"%d" % i for i in range(25)], partition=0)
    rows, batches = read(bootstrap, topic, 5, 25, "read_committed", max_records_per_batch=8)
    assert [o for o, _ in rows] == list(range(5, 25))
    assert [b.num_rows for b in batches] == [8, 8, 4]


def test_headers_and_null_keys(kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"v"], partition=0, headers=[("a", b"1"), ("a", None)])
    produce(bootstrap, topic, [b"w"], partition=0)
    _, batches = read(bootstrap, topic, 0, 2, "read_committed", include_headers=True)
    rows = batches[0].to_pylist()
    assert rows[0]["headers"] == [{"key": "a", "value": b"1"}, {"key": "a", "value": None}]
    assert rows[1]["headers"] == [] and rows[1]["key"] is None
    assert rows[0]["timestampType"] == 0 and rows[0]["partition"] == 0


def test_data_loss_below_log_start(kafka_broker, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"%d" % i for i in range(6)], partition=0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 4)]).values():
        future.result(10)
    with pytest.raises(OnceflowDataLossError, match=f"offset 1 of {topic}-0.*starts at offset 4"):
        read(bootstrap, topic, 1, 6, "read_committed")
    rows, _ = read(bootstrap, topic, 1, 6, "read_committed", fail_on_data_loss=False)
    assert [o for o, _ in rows] == [4, 5]
    rows, _ = read(bootstrap, topic, 1, 3, "read_committed", fail_on_data_loss=False)
    assert rows == []


def test_latest_is_the_last_stable_offset_under_read_committed(kafka_broker, topic):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"x", b"y"], partition=0)
    txn = WireTransactions(bootstrap)
    txn.send(topic, 0, [b"open"])  # offset 2, transaction left open
    produce(bootstrap, topic, [b"z"], partition=0)  # offset 3

    def latest(isolation: str) -> int:
        options = parse_options(
            {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": topic,
                "kafka.isolation.level": isolation,
            },
            batch=False,
        )
        return OffsetReader(options).latest([(topic, 0)])[(topic, 0)]

    assert latest("read_committed") == 2
    assert latest("read_uncommitted") == 4
    rows, _ = read(bootstrap, topic, 0, 2, "read_committed", poll_timeout_ms=3_000)
    assert [v for _, v in rows] == [b"x", b"y"]
    txn.end(commit=True)  # marker at 4
    txn.close()
    wait_until(lambda: latest("read_committed") == 5, timeout=10)
    rows, _ = read(bootstrap, topic, 2, 5, "read_committed")
    assert [v for _, v in rows] == [b"open", b"z"]
