"""Classifying the errors confluent-kafka's clients report."""

from __future__ import annotations

from confluent_kafka import KafkaError


def is_fatal(error: KafkaError) -> bool:
    """True when the client can do nothing more and must be closed.

    A consumer's fatal error (e.g. FENCED_INSTANCE_ID: another consumer took its
    ``group.instance.id``) arrives as an error event with code ``_FATAL`` whose
    ``fatal()`` is False, so both are checked.
    """
    return error.fatal() or error.code() == KafkaError._FATAL
