"""The pytest plugin (onceflow.testing): shared brokers, unique topics, clear start errors."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from onceflow.testing import BrokerProcess, BrokerStartError, start_broker

SEEN: dict[str, set] = {"ports": set(), "topics": set()}


@pytest.mark.parametrize("run", [1, 2])
def test_the_session_broker_is_shared_and_topics_are_not(
    run, kafka_session_broker, kafka_topic_factory
):
    topic = kafka_topic_factory(partitions=2)
    assert topic.startswith("test_the_session_broker_is_shared_and_topics_are_not")
    admin = AdminClient({"bootstrap.servers": kafka_session_broker.bootstrap})
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 2
    SEEN["ports"].add(kafka_session_broker.port)
    SEEN["topics"].add(topic)
    if run == 2:
        assert len(SEEN["ports"]) == 1 and len(SEEN["topics"]) == 2


def test_a_broker_that_refuses_to_start_says_why(tmp_path):
    broker = BrokerProcess(tmp_path / "data", config={"num.partition": "3"})
    with pytest.raises(BrokerStartError) as refused:
        start_broker(broker)
    assert str(refused.value).startswith(
        "broker did not start: Unknown broker configuration num.partition "
        "(did you mean num.partitions?) (full log: "
    )
