from confluent_kafka import KafkaError

from onceflow.client_errors import is_fatal


def test_a_fatal_event_is_fatal_although_its_fatal_flag_is_not_set():
    error = KafkaError(KafkaError._FATAL, "Static consumer fenced")
    assert not error.fatal()
    assert is_fatal(error)


def test_fatal_flag_and_ordinary_errors():
    assert is_fatal(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert not is_fatal(KafkaError(KafkaError._TRANSPORT, "broker down"))
