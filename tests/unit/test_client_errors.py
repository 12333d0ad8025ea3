from confluent_kafka import KafkaError, KafkaException

from onceflow.client_errors import is_fatal, worth_retrying


def test_a_fatal_event_is_fatal_although_its_fatal_flag_is_not_set():
    error = KafkaError(KafkaError._FATAL, "Static consumer fenced")
    assert not error.fatal()
    assert is_fatal(error)


def test_fatal_flag_and_ordinary_errors():
    assert is_fatal(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert not is_fatal(KafkaError(KafkaError._TRANSPORT, "broker down"))


def test_a_moving_coordinator_is_worth_asking_again_whatever_the_flag_says() -> None:
    # as the AdminClient's per-group results carry it: retriable() False
    moving = KafkaError(KafkaError.NOT_COORDINATOR)
    assert not moving.retriable() and worth_retrying(KafkaException(moving))
    for code in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError._TIMED_OUT, KafkaError._TRANSPORT):  # fmt: skip
        assert worth_retrying(KafkaException(KafkaError(code))), code
    assert worth_retrying(KafkaException(KafkaError(KafkaError.UNKNOWN, retriable=True)))
    for code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_ID_NOT_FOUND):
        assert not worth_retrying(KafkaException(KafkaError(code))), code
    assert not worth_retrying(ValueError("not a Kafka error"))
