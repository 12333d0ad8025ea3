"""Kafka's transactional-copier test: exactly-once copy while copiers and broker are killed."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORDS = 10_000
PARTITIONS = 3
ROOT = Path(__file__).resolve().parents[2]


def start_copier(bootstrap: str, log_path: Path, protocol: str) -> subprocess.Popen:
    with open(log_path, "a") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.copier",
                bootstrap,
                "input",
                "output",
                "copier-group",
                "copier-txn",
                protocol,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )


def read_committed(bootstrap: str, topic: str, seconds: float) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "auditor",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: dict[int, list[bytes]] = defaultdict(list)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.3):
            if message.error() is None:
                values[message.partition()].append(message.value())
    consumer.close()
    return values


# KIP-848 members are removed by the broker's session timeout (45 s by default): shorter
# here, so a killed copier's partitions move on as quickly as with the classic protocol.
BROKER_CONFIGS = {
    "classic": {},
    "consumer": {
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "500",
    },
}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_transactional_copy_is_exactly_once_under_kills(kafka_broker_factory, tmp_path, protocol):
    kafka_broker = kafka_broker_factory(config=BROKER_CONFIGS[protocol], process=True)
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic("input", PARTITIONS, 1), NewTopic("output", PARTITIONS, 1)]
    ).values():
        future.result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for number in range(RECORDS):
        producer.produce("input", key=str(number % 50).encode(), value=str(number).encode())
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    expected = read_committed(bootstrap, "input", 3)
    assert sum(len(v) for v in expected.values()) == RECORDS

    rng = random.Random(7)
    log_path = tmp_path / "copier.log"
    copier = start_copier(bootstrap, log_path, protocol)
    copier_kills = broker_kills = 0
    deadline = time.monotonic() + 240
    finished = False
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(1.0, 2.5))
        if copier_kills >= 5:
            code = copier.poll()
            if code == 0:  # caught up: everything consumed and committed
                finished = True
                break
            if code is not None:
                copier = start_copier(bootstrap, log_path, protocol)
            continue
        if broker_kills < 2 and copier_kills in (1, 3):
            kafka_broker.restart(kill=True)
            broker_kills += 1
        copier.kill()
        copier.wait()
        copier_kills += 1
        copier = start_copier(bootstrap, log_path, protocol)
    copier.kill()
    copier.wait()
    assert finished, f"copier did not finish; see {log_path}"
    assert copier_kills == 5 and broker_kills == 2

    (listing,) = [
        group
        for group in admin.list_consumer_groups().result(10).valid
        if group.group_id == "copier-group"
    ]
    assert listing.type.name.lower() == protocol

    output = read_committed(bootstrap, "output", 4)
    for partition in range(PARTITIONS):
        got, want = output.get(partition, []), expected[partition]
        assert len(got) == len(want), (
            f"partition {partition}: {len(got)} records out for {len(want)} in "
            f"({len(got) - len(set(got))} duplicates); see {log_path}"
        )
        assert got == want, f"partition {partition}: order or content differs"
