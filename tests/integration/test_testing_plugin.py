"""The pytest plugin (onceflow.testing): shared brokers, unique topics, clear start errors."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from onceflow.broker.in_process import InProcessBrokerError
from onceflow.testing import (
    BrokerProcess,
    BrokerStartError,
    InProcessBroker,
    start_broker,
    unique_name,
)
from tests.kit.clients import consume, create_topic, produce, values

SEEN: dict[str, set] = {"ports": set(), "topics": set()}


# Both runs on one xdist worker: each worker process has its own session broker.
@pytest.mark.xdist_group("testing-plugin-session")
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


def test_an_in_process_broker_that_refuses_to_start_says_why(kafka_broker_factory):
    with pytest.raises(BrokerStartError) as refused:
        kafka_broker_factory(config={"num.partition": "3"})
    assert str(refused.value).startswith(
        "broker did not start: Unknown broker configuration num.partition "
        "(did you mean num.partitions?)"
    )


def test_kafka_broker_runs_in_this_process_and_cannot_be_killed(kafka_broker):
    assert isinstance(kafka_broker, InProcessBroker)
    with pytest.raises(InProcessBrokerError, match="kafka_broker_process"):
        kafka_broker.kill()
    kafka_broker.restart()  # a clean restart, same port
    topic = unique_name("plugin")
    create_topic(kafka_broker.bootstrap, topic)
    assert (
        topic
        in AdminClient({"bootstrap.servers": kafka_broker.bootstrap}).list_topics(timeout=10).topics
    )


def test_kafka_broker_process_is_a_child_to_kill_and_start_again(kafka_broker_process):
    assert isinstance(kafka_broker_process, BrokerProcess)
    topic = unique_name("plugin")
    create_topic(kafka_broker_process.bootstrap, topic)
    produce(kafka_broker_process.bootstrap, topic, [b"kept"])
    kafka_broker_process.kill()
    kafka_broker_process.start()
    assert values(consume(kafka_broker_process.bootstrap, topic, 1)) == [b"kept"]


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    return {"num.partitions": "4"}


def test_a_module_gives_its_broker_settings(kafka_module_broker):
    assert kafka_module_broker.config == {"num.partitions": "4"}
    topic = unique_name("plugin")
    produce(kafka_module_broker.bootstrap, topic, [b"auto-created"])
    admin = AdminClient({"bootstrap.servers": kafka_module_broker.bootstrap})
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 4
