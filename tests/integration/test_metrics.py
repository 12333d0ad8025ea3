"""``metrics.port``: the broker's Prometheus metrics, by the names the JMX exporter's Kafka
rules give Kafka's MBeans, with values that follow what real clients did."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from onceflow.ports import free_port
from onceflow.testing import unique_name
from tests.integration.console_script import onceflow
from tests.kit.clients import admin, consume, create_topic, produce


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    # Chosen when the broker starts: a port chosen at import (collection) is no longer
    # reserved (onceflow.ports.RESERVED_S) when the module runs minutes later.
    return {"metrics.port": str(free_port())}


@pytest.fixture(scope="module")
def metrics_broker(kafka_module_broker, kafka_module_broker_config):
    port = kafka_module_broker_config["metrics.port"]
    return kafka_module_broker, f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def test_produce_and_fetch_are_counted_by_kafka_names(metrics_broker):
    broker, url = metrics_broker
    topic = unique_name("metered")
    create_topic(broker.bootstrap, topic, partitions=2)
    before = scrape(url)
    produce(broker.bootstrap, topic, [b"x" * 100] * 30, partitions=2)
    consume(broker.bootstrap, topic, 30)
    after = scrape(url)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 30
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in > 30 * 100  # the batches as written: records and their headers
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    every = value(after, "kafka_server_brokertopicmetrics_messagesin_total")
    assert every - before.get(("kafka_server_brokertopicmetrics_messagesin_total", ()), 0) >= 30
    for partition in ("0", "1"):
        labels = {"topic": topic, "partition": partition}
        assert value(after, "kafka_log_log_logendoffset", **labels) == 15
        assert value(after, "kafka_log_log_logstartoffset", **labels) == 0
        assert value(after, "kafka_log_log_size", **labels) > 0
        assert value(after, "onceflow_log_partition_unstable_records", **labels) == 0
    produce_requests = sum(
        count for (name, labels), count in after.items()
        if name == "kafka_network_requestmetrics_requests_total"
        and dict(labels)["request"] == "Produce"
    )  # fmt: skip
    assert produce_requests >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Fetch") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems", request="Produce",
                 quantile="0.99") >= 0  # fmt: skip
    assert value(after, "kafka_log_logflushstats_logflushrateandtimems_count") >= 1
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_a_failed_produce_is_counted_for_its_topic(metrics_broker):
    broker, url = metrics_broker
    topic = unique_name("small")
    create_topic(broker.bootstrap, topic, **{"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100_000})
    errors = []
    producer.produce(topic, b"y" * 5000, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(10)
    assert errors and errors[0] is not None
    samples = scrape(url)
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=topic) >= 1  # fmt: skip
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0


def test_an_open_transaction_shows_in_the_lso_gap_and_its_age(metrics_broker):
    broker, url = metrics_broker
    topic = unique_name("pending")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    producer.begin_transaction()
    for n in range(5):
        producer.produce(topic, str(n).encode(), partition=0)
    producer.flush(10)
    samples = scrape(url)
    labels = {"topic": topic, "partition": "0"}
    assert value(samples, "onceflow_log_partition_unstable_records", **labels) == 5
    assert value(samples, "onceflow_log_partition_last_stable_offset", **labels) == 0
    assert value(samples, "onceflow_transactions", state="Ongoing") >= 1
    assert value(samples, "onceflow_transactions_oldest_open_seconds") > 0
    committed = value(samples, "onceflow_transactions_completed_total", result="commit")
    producer.commit_transaction(10)
    samples = scrape(url)
    assert value(samples, "onceflow_log_partition_unstable_records", **labels) == 0
    assert value(samples, "onceflow_transactions_completed_total", result="commit") == (
        committed + 1
    )


def test_a_deleted_topic_leaves_the_metrics_and_made_up_names_never_enter(metrics_broker):
    broker, url = metrics_broker
    topic = unique_name("gone")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"z"])
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", topic),)) in scrape(url)
    client = admin(broker.bootstrap)
    client.delete_topics([topic])[topic].result(10)
    samples = scrape(url)
    assert not any(dict(labels).get("topic") == topic for _, labels in samples)


def test_a_taken_metrics_port_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = onceflow("broker", "--data-dir", str(tmp_path / "data"), "--port", "0",
                          "--config", f"metrics.port={port}")  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and f"metrics.port {port}" in result.stderr
    assert not (tmp_path / "data").exists()  # nothing opened before the port was refused
