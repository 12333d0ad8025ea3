"""onceflow.producing.abort_transaction calls librdkafka again after a retriable error."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from onceflow.producing import abort_transaction


class StuckThenAborted:
    """A producer whose first abort_transaction() times out (retriable), as librdkafka's
    does when a record came back from a dead connection after the purge."""

    def __init__(self, failures: list[KafkaError]) -> None:
        self.failures = failures
        self.calls: list[float] = []

    def poll(self, _timeout: float) -> int:
        return 0

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append(timeout)
        if self.failures:
            time.sleep(min(timeout, 0.01))  # librdkafka waits out the timeout first
            raise KafkaException(self.failures.pop(0))


def timed_out(retriable: bool) -> KafkaError:
    return KafkaError(KafkaError._TIMED_OUT, "10 message(s) remaining", retriable=retriable)


def test_a_retriable_failure_is_followed_by_another_call():
    producer = StuckThenAborted([timed_out(True), timed_out(True)])
    abort_transaction(producer, 30)
    assert len(producer.calls) == 3
    assert all(0 < timeout <= 5 for timeout in producer.calls)


def test_a_failure_that_is_not_retriable_is_raised_at_once():
    producer = StuckThenAborted([KafkaError(KafkaError._FENCED, "fenced", fatal=True)])
    with pytest.raises(KafkaException):
        abort_transaction(producer, 30)
    assert len(producer.calls) == 1


def test_retriable_failures_are_raised_once_the_timeout_has_passed():
    producer = StuckThenAborted([timed_out(True)] * 100)
    with pytest.raises(KafkaException):
        abort_transaction(producer, 0.05)
    assert len(producer.calls) < 100
