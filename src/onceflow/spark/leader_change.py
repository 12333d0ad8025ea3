"""Riding out a partition's change of leader (a Kafka cluster losing a node).

On a cluster, a request for one partition can reach a broker that no longer leads it (or
does not know it yet, right after a topic is created): Kafka answers
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or a leader-epoch error, a dead leader's
connection fails, and the client refreshes its metadata. librdkafka retries these inside
produce and fetch, but not for one-shot requests such as ``get_watermark_offsets`` or
the admin ``list_offsets``: those raise, and are asked again here until the new leader
answers or the deadline passes. A single broker never gives these answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

log = logging.getLogger(__name__)

T = TypeVar("T")

LEADER_CHANGE_ERRORS = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,  # Kafka's NOT_LEADER_OR_FOLLOWER (6)
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,  # the leader's connection broke (it died)
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)
RETRY_PAUSE_S = 0.1  # librdkafka refreshes its metadata after such an answer
# One attempt's limit: a request bound to a leader that just died waits for it until
# its timeout, while the partition moves to another node (Kafka fences a silent broker
# after broker.session.timeout.ms, 9 s by default, then elects a new leader).
ATTEMPT_TIMEOUT_S = 10.0
# How long a request rides out a leader change before its error is raised.
LEADER_CHANGE_WAIT_S = 60.0


def error_code(error: BaseException) -> int | None:
    """The ``KafkaError`` code of a ``KafkaException`` (None if it carries none)."""
    if isinstance(error, KafkaException) and error.args:
        code = getattr(error.args[0], "code", None)
        return code() if callable(code) else None
    return None


def is_leader_change(code: int | None, also: Iterable[int] = ()) -> bool:
    return code is not None and (code in LEADER_CHANGE_ERRORS or code in set(also))


def while_leader_moves(
    call: Callable[[], T], timeout: float, what: str, also: Iterable[int] = ()
) -> T:
    """``call()``, asked again while it fails with a leader-change error (or one of
    ``also``) for up to ``timeout`` seconds; the last error is raised after that."""
    deadline = time.monotonic() + timeout
    retryable = frozenset(also)
    while True:
        try:
            return call()
        except KafkaException as error:
            code = error_code(error)
            if not is_leader_change(code, retryable) or time.monotonic() > deadline:
                raise
            log.info("%s: %s; asking again (leader change)", what, error.args[0])
            time.sleep(RETRY_PAUSE_S)
