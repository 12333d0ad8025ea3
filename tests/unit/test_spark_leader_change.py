"""The Spark connectors ask again while a partition's leader moves, and only then."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from onceflow.spark import leader_change
from onceflow.spark.leader_change import while_leader_moves


class Flaky:
    """Raises the given error codes in turn, then answers 42."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.codes:
            raise KafkaException(KafkaError(self.codes.pop(0)))
        return 42


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(leader_change, "RETRY_PAUSE_S", 0)


def test_asks_again_while_the_leader_moves():
    call = Flaky(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
    assert while_leader_moves(call, 5, "offsets") == 42
    assert call.calls == 3


def test_other_errors_are_raised_at_once():
    call = Flaky(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        while_leader_moves(call, 5, "offsets")
    assert call.calls == 1


def test_also_adds_errors_for_one_caller():
    call = Flaky(KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert while_leader_moves(call, 5, "marker", also=(KafkaError.UNKNOWN_TOPIC_OR_PART,)) == 42
    with pytest.raises(KafkaException):
        while_leader_moves(Flaky(KafkaError.UNKNOWN_TOPIC_OR_PART), 5, "offsets")


def test_the_last_error_is_raised_after_the_deadline():
    call = Flaky(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException) as raised:
        while_leader_moves(call, -1, "offsets")  # a deadline already passed
    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert call.calls == 1
