"""RunnerConfig.worker_id: the static member id the Runner joins its group with."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from onceflow.patterns import ConfigurationError, RunnerConfig
from onceflow.patterns.runner import consumer_settings
from onceflow.patterns.worker_identity import group_instance_id, previous_incarnation_holds


def config(**changes) -> RunnerConfig:
    return RunnerConfig("127.0.0.1:9092", "orders", ["orders"],
                        processing_guarantee="at_least_once", **changes)  # fmt: skip


def test_a_worker_id_makes_the_runner_a_static_member_of_its_group():
    worker = config(worker_id="2")
    worker.validate()
    assert group_instance_id(worker) == "orders-2"
    assert consumer_settings(worker)["group.instance.id"] == "orders-2"


def test_without_a_worker_id_or_with_assign_there_is_no_static_member():
    assert "group.instance.id" not in consumer_settings(config())
    assert group_instance_id(config(worker_id="2", assign=True)) is None
    verbatim = config(consumer_config={"group.instance.id": "w1"})
    assert group_instance_id(verbatim) == consumer_settings(verbatim)["group.instance.id"] == "w1"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"worker_id": ""}, "worker_id must be a non-empty string, got ''"),
        ({"worker_id": 2}, "worker_id must be a non-empty string, got 2"),
        ({"worker_id": "2", "consumer_config": {"group.instance.id": "w2"}},
         "consumer_config['group.instance.id'] and worker_id both name this worker"),
    ],
)  # fmt: skip
def test_bad_worker_ids_are_refused(changes, expected):
    with pytest.raises(ConfigurationError) as refused:
        config(**changes).validate()
    assert str(refused.value).startswith(expected)


def test_only_the_unreleased_instance_id_is_taken_for_a_previous_incarnation():
    unreleased = KafkaError(
        KafkaError._FATAL,
        "Fatal error: Broker: The instance ID is still used by another member in the "
        "consumer group: ConsumerGroupHeartbeat fatal error",
        fatal=True,
    )
    fenced = KafkaError(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced by "
                        "other consumer with same group.instance.id", fatal=True)  # fmt: skip
    transient = KafkaError(KafkaError._TRANSPORT, "instance ID is still used by another member")
    assert previous_incarnation_holds(unreleased)
    assert not previous_incarnation_holds(fenced)
    assert not previous_incarnation_holds(transient)
