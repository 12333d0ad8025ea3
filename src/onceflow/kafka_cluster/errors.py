"""The one error the Kafka launcher raises: a sentence naming the cause, never a trace."""

from __future__ import annotations


class KafkaClusterError(RuntimeError):
    """Apache Kafka could not be fetched, started or reached; ``str()`` is one line."""
