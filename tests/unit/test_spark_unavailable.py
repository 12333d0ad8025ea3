"""What the Spark connectors call "unavailable" (and ask again for), for how long, and the
one line they fail with after ``unavailableTimeoutMs`` (issue 33, item 8). The real
outages are in tests/apache_kafka/test_spark_outages.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from onceflow.spark import leader_change
from onceflow.spark.kafka_sink.options import KafkaSinkError, parse_kafka_options
from onceflow.spark.kafka_source import offset_reader
from onceflow.spark.kafka_source.offset_reader import OffsetReader
from onceflow.spark.kafka_source.options import OnceflowOptionError, parse_options
from onceflow.spark.leader_change import (
    NO_LEADER_ERRORS,
    KafkaUnavailableError,
    Patience,
    is_unavailable,
    while_leader_moves,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
NO_LEADERS = KafkaError(
    KafkaError._NOENT, "Failed to query partition leaders: No leaders found", retriable=False
)


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(leader_change, "RETRY_PAUSE_S", 0)
    monkeypatch.setattr(leader_change, "MAX_RETRY_PAUSE_S", 0)


def test_no_leaders_found_is_unavailable_where_it_can_only_mean_that():
    error = KafkaException(NO_LEADERS)
    assert is_unavailable(error, NO_LEADER_ERRORS)
    assert not is_unavailable(error)  # elsewhere _NOENT may mean something else


def test_retriable_errors_are_unavailable_fatal_and_final_ones_are_not():
    assert is_unavailable(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    assert is_unavailable(TimeoutError())
    flush = KafkaError(KafkaError._FAIL, "flush", retriable=True)
    assert is_unavailable(KafkaException(flush))
    fenced = KafkaError(KafkaError._FENCED, "fenced", fatal=True, retriable=True)
    assert not is_unavailable(KafkaException(fenced))
    assert not is_unavailable(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    assert not is_unavailable(KafkaUnavailableError("gone", KafkaError(KafkaError._TIMED_OUT)))


def test_no_leaders_found_is_asked_again_until_a_leader_answers():
    answers = [KafkaException(NO_LEADERS)] * 3 + [42]

    def call():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert while_leader_moves(call, 60, "offsets of orders-0", also=NO_LEADER_ERRORS) == 42


def test_after_the_timeout_one_line_names_what_how_long_and_the_option():
    def call():
        raise KafkaException(NO_LEADERS)

    with pytest.raises(KafkaUnavailableError) as raised:
        while_leader_moves(call, 0.05, "offsets of orders-0, orders-3", also=NO_LEADER_ERRORS)
    text = str(raised.value)
    assert "\n" not in text
    assert text.startswith("offsets of orders-0, orders-3: still unavailable after 0 s")
    assert "(Failed to query partition leaders: No leaders found)" in text
    assert "'unavailableTimeoutMs' (50 ms)" in text
    assert raised.value.args[0].code() == KafkaError._NOENT  # still a KafkaException


def test_patience_counts_from_the_first_failure_after_a_success(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(leader_change.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(leader_change.time, "sleep", lambda seconds: None)
    patience = Patience(10, "reading orders-0")
    error = KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
    clock[0] = 109.0
    patience.failed(error)  # 9 s of the 10
    patience.succeeded()
    clock[0] = 150.0
    patience.failed(error)  # a new outage: its own 10 s
    clock[0] = 159.0
    patience.failed(error)
    clock[0] = 160.0
    with pytest.raises(KafkaUnavailableError):
        patience.failed(error)


def test_source_option_unavailable_timeout():
    assert parse_options(BASE, batch=False).unavailable_timeout_ms == 120_000
    options = parse_options({**BASE, "unavailableTimeoutMs": "5000"}, batch=False)
    assert options.unavailable_timeout_s == 5.0
    with pytest.raises(OnceflowOptionError, match="'unavailableTimeoutMs' must be a positive"):
        parse_options({**BASE, "unavailableTimeoutMs": "0"}, batch=None)


def test_sink_transactions_outlive_the_outage_they_ride_through():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "out", "sinkId": "s"}
    options = parse_kafka_options(base, streaming=True)
    assert options.unavailable_timeout_s == 120.0
    # librdkafka gives up on a record after message.timeout.ms = transaction.timeout.ms
    assert options.producer_config["transaction.timeout.ms"] == "180000"
    shorter = parse_kafka_options({**base, "unavailableTimeoutMs": "30000"}, streaming=True)
    assert shorter.producer_config["transaction.timeout.ms"] == "90000"
    mine = parse_kafka_options({**base, "kafka.transaction.timeout.ms": "70000"}, streaming=True)
    assert mine.producer_config["transaction.timeout.ms"] == "70000"
    with pytest.raises(KafkaSinkError, match="unavailableTimeoutMs must be positive"):
        parse_kafka_options({**base, "unavailableTimeoutMs": "-1"}, streaming=True)


class FakeAdmin:
    """An AdminClient whose metadata is ``TOPICS`` and whose ListOffsets answers come from
    ``ANSWERS`` (per partition, one per request; an exception or an offset)."""

    TOPICS: dict[str, list[int]] = {}
    ANSWERS: dict[tuple[str, int], list[object]] = {}

    def __init__(self, config: dict) -> None:
        pass

    def list_topics(self, timeout: float) -> SimpleNamespace:
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(error=None, partitions={p: None for p in partitions})
                for name, partitions in self.TOPICS.items()
            }
        )

    def list_offsets(self, request: dict, **_options: object) -> dict:
        futures = {}
        for tp in request:
            future: Future = Future()
            answer = self.ANSWERS[(tp.topic, tp.partition)].pop(0)
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(SimpleNamespace(offset=answer))
            futures[tp] = future
        return futures


def test_a_partition_said_unknown_while_the_metadata_has_it_is_asked_again(monkeypatch):
    """After a leader's SIGKILL librdkafka answered _UNKNOWN_PARTITION for one partition of
    a replicated topic; the query took it for a deleted one and failed (data loss)."""
    monkeypatch.setattr(offset_reader, "AdminClient", FakeAdmin)
    monkeypatch.setattr(FakeAdmin, "TOPICS", {"orders": [0, 1], "other": [0]})
    unknown = KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
    gone = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    answers = {("orders", 0): [5], ("orders", 1): [unknown, unknown, 7], ("deleted", 0): [gone]}
    monkeypatch.setattr(FakeAdmin, "ANSWERS", answers)
    reader = OffsetReader(parse_options({**BASE, "subscribe": "orders,deleted"}, batch=False))
    latest = reader.latest([("orders", 0), ("orders", 1), ("deleted", 0)])
    assert latest == {("orders", 0): 5, ("orders", 1): 7}  # deleted-0 is left out: gone


def test_a_partition_said_unknown_for_too_long_is_unavailable(monkeypatch):
    monkeypatch.setattr(offset_reader, "AdminClient", FakeAdmin)
    monkeypatch.setattr(FakeAdmin, "TOPICS", {"orders": [0]})
    unknown = KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
    monkeypatch.setattr(FakeAdmin, "ANSWERS", {("orders", 0): [unknown] * 10_000})
    reader = OffsetReader(parse_options({**BASE, "unavailableTimeoutMs": "50"}, batch=False))
    with pytest.raises(KafkaUnavailableError, match=r"^offsets of orders-0: still unavailable"):
        reader.latest([("orders", 0)])
