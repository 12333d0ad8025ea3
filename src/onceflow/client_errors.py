"""Classifying the errors confluent-kafka's clients report."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def is_fatal(error: KafkaError) -> bool:
    """True when the client can do nothing more and must be closed.

    A consumer's fatal error (e.g. FENCED_INSTANCE_ID: another consumer took its
    ``group.instance.id``) arrives as an error event with code ``_FATAL`` whose
    ``fatal()`` is False, so both are checked.
    """
    return error.fatal() or error.code() == KafkaError._FATAL


# A partition's leader is changing (a node died or came back): asking again later gets the
# next leader's answer. OFFSET_NOT_AVAILABLE (78) is a new leader's ListOffsets answer
# until its high watermark has caught up with its followers' (KIP-207).
LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,  # Kafka's NOT_LEADER_OR_FOLLOWER (6)
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError._TRANSPORT,  # the leader's connection broke (it died)
        KafkaError._DESTROY_BROKER,  # ... or its node left the metadata (fenced)
    }
)


# A group's or a transactional id's coordinator is moving (its node died or came back), or
# the new one is still loading its state: asking again later gets the next one's answer.
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


# What asking again later can cure: a moving leader or coordinator, or a request that timed
# out while one moved.
TIMED_OUT = frozenset({KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT})
MOVING_OR_TIMED_OUT = LEADER_MOVING | COORDINATOR_MOVING | TIMED_OUT


def worth_retrying(error: BaseException) -> bool:
    """``error`` is a KafkaException that asking again can cure: one the client marks
    retriable, or one of ``MOVING_OR_TIMED_OUT``. (The AdminClient's per-group and
    per-topic results never mark themselves retriable: a group's NOT_COORDINATOR from
    ``delete_consumer_groups`` comes with ``retriable()`` False.)"""
    if not isinstance(error, KafkaException) or not error.args:
        return False
    if getattr(error.args[0], "retriable", lambda: False)():
        return True
    return error_code(error) in MOVING_OR_TIMED_OUT


def error_code(error: BaseException) -> int | None:
    """The ``KafkaError`` code of a ``KafkaException`` (None if it carries none)."""
    if isinstance(error, KafkaException) and error.args:
        code = getattr(error.args[0], "code", None)
        return code() if callable(code) else None
    return None


def leader_moving(error: BaseException) -> bool:
    """``error`` is a KafkaException that says a partition's leader is changing."""
    return error_code(error) in LEADER_MOVING
