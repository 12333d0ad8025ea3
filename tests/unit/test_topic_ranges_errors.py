"""Which errors a read of a topic's offsets asks again after: a partition whose leader is
changing (a node killed under prove's leader fault answered UNKNOWN_LEADER_EPOCH once, and
the proof crashed instead of reading the next leader's answer; another answered
OFFSET_NOT_AVAILABLE, its high watermark not caught up yet), never a refusal."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from onceflow.client_errors import leader_moving


def test_a_moving_leader_is_asked_again() -> None:
    for code in (KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
                 KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.OFFSET_NOT_AVAILABLE, KafkaError._DESTROY_BROKER):  # fmt: skip
        assert leader_moving(KafkaException(KafkaError(code))), code


def test_a_refusal_is_not() -> None:
    for code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.UNKNOWN_TOPIC_OR_PART):
        assert not leader_moving(KafkaException(KafkaError(code))), code
