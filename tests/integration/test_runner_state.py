"""The Runner's state on a real broker: waiting is not idleness, counters, INFO logs.

One broker for the module; each test has its own topics and group.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from confluent_kafka import Consumer
from prometheus_client import CollectorRegistry

from onceflow.patterns import Runner, RunnerConfig
from onceflow.patterns.metrics import expose_metrics
from onceflow.testing import unique_name
from tests.kit.clients import produce

RECORDS = 40


def produce_json(bootstrap: str, topic: str, count: int) -> None:
    """``count`` JSON records {"n": n}, keyed k0 to k3 in turn."""
    values = [json.dumps({"n": n}) for n in range(count)]
    produce(bootstrap, topic, values, keys=[f"k{n % 4}" for n in range(count)])


def at_least_once(bootstrap: str, topic: str, group: str, **extra) -> RunnerConfig:
    return RunnerConfig(
        bootstrap_servers=bootstrap,
        group_id=group,
        topics=[topic],
        processing_guarantee="at_least_once",
        batch_size=10,
        poll_timeout_s=0.2,
        consumer_config={"session.timeout.ms": 6000, "fetch.wait.max.ms": 50},
        **extra,
    )


def test_idle_exit_waits_for_partitions_then_drains_them(
    kafka_module_broker, kafka_topic_factory, caplog
):
    """A member that holds the only partition keeps the Runner waiting: not idle, no exit.

    Before, idle_exit_s counted the wait for an assignment, so a Runner restarted after a
    crash exited 0 with everything unprocessed.
    """
    bootstrap = kafka_module_broker.bootstrap
    topic = kafka_topic_factory(partitions=1, broker=kafka_module_broker)
    group = unique_name("waiting")
    produce_json(bootstrap, topic, RECORDS)
    holder = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000}
    )
    holder.subscribe([topic])
    while not holder.assignment():
        holder.poll(0.1)
    held_for = 4.0

    def hold_then_leave() -> None:  # rejoins the rebalance the Runner starts, keeps [0]
        deadline = time.monotonic() + held_for
        while time.monotonic() < deadline:
            holder.poll(0.1)
        holder.close()

    seen: list[int] = []
    runner = Runner(
        at_least_once(bootstrap, topic, group, idle_exit_s=1.0, progress_log_s=1.0),
        lambda record, ctx: seen.append(record.value["n"]),
    )
    caplog.set_level(logging.INFO, logger="onceflow.patterns.runner")
    member = threading.Thread(target=hold_then_leave)
    started = time.monotonic()
    member.start()
    stats = runner.run()
    took = time.monotonic() - started
    member.join()
    assert took > held_for, f"exited after {took:.1f} s while another member held the partition"
    assert sorted(seen) == list(range(RECORDS))
    assert (stats.records, stats.processed, stats.lag) == (RECORDS, RECORDS, 0)
    assert stats.commits >= RECORDS // 10 and stats.batches >= RECORDS // 10
    messages = [r.getMessage() for r in caplog.records]
    assert any("waiting for partitions" in m for m in messages), messages
    assert any(m.startswith(f"assigned {topic}[0]") for m in messages), messages
    assert any("records/s" in m for m in messages), messages
    assert any("idle for" in m for m in messages), messages


def test_counters_as_prometheus_metrics(kafka_module_broker, kafka_topic_factory):
    bootstrap = kafka_module_broker.bootstrap
    topic = kafka_topic_factory(partitions=2, broker=kafka_module_broker)
    dead_letters = kafka_topic_factory(partitions=1, broker=kafka_module_broker)
    produce_json(bootstrap, topic, RECORDS)

    owned_while_running = []

    def handle(record, ctx) -> None:
        if record.value["n"] == 7:
            raise ValueError("seven is poison")
        if record.value["n"] == 30:
            owned_while_running.append(metric("onceflow_runner_owned_partitions"))

    config = at_least_once(
        bootstrap,
        topic,
        unique_name("metrics"),
        idle_exit_s=0.5,
        dead_letter_topic=dead_letters,
        max_attempts=2,
        retry_backoff_s=0.01,
    )
    runner = Runner(config, handle)
    registry = CollectorRegistry()
    expose_metrics(runner, registry)

    def metric(name: str) -> float | None:
        return registry.get_sample_value(name, {"group": config.group_id})

    stats = runner.run()
    assert stats.dead_lettered == 1
    assert stats.retries == 2  # two failed attempts, each rewinding its batch
    assert stats.processed >= RECORDS - 1  # records before 7 in its batch ran again
    assert owned_while_running and set(owned_while_running) == {2}
    assert metric("onceflow_runner_processed_total") == stats.processed
    assert metric("onceflow_runner_dead_lettered_total") == 1
    assert metric("onceflow_runner_retries_total") == 2
    assert metric("onceflow_runner_records_total") == stats.records > RECORDS
    assert metric("onceflow_runner_commits_total") == stats.commits > 0
    assert metric("onceflow_runner_lag") == 0


def test_a_refused_override_names_the_setting_before_connecting():
    config = RunnerConfig(
        bootstrap_servers="127.0.0.1:9",
        group_id="g",
        topics=["t"],
        consumer_config={"enable.auto.commit": True},
    )
    with pytest.raises(ValueError, match=r"consumer_config\['enable.auto.commit'\] = True"):
        Runner(config, lambda record, ctx: None)
