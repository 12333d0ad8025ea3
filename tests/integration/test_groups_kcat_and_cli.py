"""Consumer groups through kcat (metadata and its balanced consumer) and ``onceflow
groups``, on a real broker."""

from __future__ import annotations

import subprocess

from click.testing import CliRunner
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from onceflow.cli import main
from tests.integration.group_helpers import consumer, numbered, poll_records
from tests.kit.clients import create_topic, produce

# -- kcat and the CLI -----------------------------------------------------------------------


def test_kcat_metadata_and_balanced_consumer(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "kc", 3)
    produce(bootstrap, "kc", numbered(30), partitions=3)
    listing = subprocess.run(
        ["kcat", "-L", "-b", bootstrap], capture_output=True, text=True, timeout=60, check=True
    )
    assert "1 brokers:" in listing.stdout
    assert 'topic "kc" with 3 partitions' in listing.stdout
    consumed = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-G",
            "kcat-group",
            "kc",
            "-X",
            "auto.offset.reset=earliest",
            "-c",
            "30",
            "-f",
            "%p:%o\\n",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    lines = sorted(line for line in consumed.stdout.splitlines() if line)
    assert lines == sorted(f"{p}:{o}" for p in range(3) for o in range(10))
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def committed_by_kcat() -> list[tuple[int, int]]:
        request = [ConsumerGroupTopicPartitions("kcat-group")]
        result = admin.list_consumer_group_offsets(request)["kcat-group"].result(10)
        return sorted((tp.partition, tp.offset) for tp in result.topic_partitions)

    assert committed_by_kcat() == [(0, 10), (1, 10), (2, 10)]


def test_onceflow_groups_cli(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "cli-topic", 2)
    produce(bootstrap, "cli-topic", numbered(20), partitions=2)
    c = consumer(bootstrap, "cli-group", **{"client.id": "cli-member"})
    c.subscribe(["cli-topic"])
    poll_records(c, 20)
    c.commit(offsets=[TopicPartition("cli-topic", 0, 4), TopicPartition("cli-topic", 1, 10)])
    runner = CliRunner()
    env = {"COLUMNS": "250"}

    listed = runner.invoke(main, ["groups", "list", "--bootstrap", bootstrap], env=env)
    assert listed.exit_code == 0, listed.output
    assert "cli-group" in listed.output and "Stable" in listed.output
    assert "range" in listed.output

    described = runner.invoke(
        main, ["groups", "describe", "cli-group", "--bootstrap", bootstrap], env=env
    )
    assert described.exit_code == 0, (described.output, described.exc_info)
    assert "cli-member" in described.output and "cli-topic[0,1]" in described.output
    assert c.memberid() in described.output

    offsets = runner.invoke(
        main, ["groups", "offsets", "cli-group", "--bootstrap", bootstrap], env=env
    )
    assert offsets.exit_code == 0, offsets.output
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in offsets.output.splitlines()
        if "cli-topic" in line
    ]
    assert [row[:5] for row in rows] == [
        ["cli-topic", "0", "4", "10", "6"],
        ["cli-topic", "1", "10", "10", "0"],
    ]
    assert "total lag: 6" in offsets.output
    c.close()
