"""Real clients over every listener type of one broker.

confluent-kafka, kafka-python and aiokafka each produce and read back records over SSL
(with and without a client certificate), SASL_PLAINTEXT and SASL_SSL with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; kcat over SASL_SSL. The PLAINTEXT listener keeps working
beside them, and the metadata a client gets names its own listener's address.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from tests.integration.security.secured import ALICE, BOB, PLAIN_USERS, client_config

TIMEOUT = 15
CAROL = ("carol", PLAIN_USERS["carol"])
CASES = [
    ("SSL", None, None, False),
    ("SSL", None, None, True),
    ("SASL_PLAINTEXT", "PLAIN", CAROL, False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", ALICE, False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", BOB, False),
    ("SASL_SSL", "PLAIN", CAROL, False),
    ("SASL_SSL", "SCRAM-SHA-256", ALICE, False),
    ("SASL_SSL", "SCRAM-SHA-512", ALICE, True),
]
IDS = [
    f"{listener}-{mechanism or 'tls'}{'-client-cert' if cert else ''}"
    for listener, mechanism, _, cert in CASES
]


@pytest.fixture(scope="module")
def topic(secured_broker) -> str:
    name = f"listeners-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured_broker.bootstrap_for("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(TIMEOUT)
    return name


def settings(secured_broker, tls_files, case) -> dict[str, str]:
    listener, mechanism, user, cert = case
    return client_config(secured_broker, listener, tls_files, mechanism, user, cert)


def values(label: str) -> list[bytes]:
    return [f"{label}-{n}".encode() for n in range(3)]


# -- confluent-kafka ---------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_confluent_kafka(secured_broker, tls_files, topic, case):
    config = settings(secured_broker, tls_files, case)
    label = f"confluent-{uuid.uuid4().hex[:6]}"
    producer = Producer({**config, "enable.idempotence": True})
    for value in values(label):
        producer.produce(topic, value, key=label.encode())
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({**config, "group.id": label, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 3 and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.2):
            assert message.error() is None, message.error()
            if message.key() == label.encode():
                seen.append(message.value())
    advertised = consumer.list_topics(topic, timeout=TIMEOUT).brokers[0]
    consumer.close()
    assert seen == values(label)
    assert f"{advertised.host}:{advertised.port}" == config["bootstrap.servers"]


# -- kafka-python ------------------------------------------------------------------------


def python_client_settings(config: dict[str, str]) -> dict:
    """librdkafka ``config`` as kafka-python and aiokafka both name it, but for TLS."""
    settings = {
        "bootstrap_servers": config["bootstrap.servers"],
        "security_protocol": config["security.protocol"],
    }
    if "sasl.mechanism" in config:
        settings["sasl_mechanism"] = config["sasl.mechanism"]
        settings["sasl_plain_username"] = config["sasl.username"]
        settings["sasl_plain_password"] = config["sasl.password"]
    return settings


def kafka_python_settings(config: dict[str, str]) -> dict:
    settings = python_client_settings(config)
    if "ssl.ca.location" in config:
        settings["ssl_cafile"] = config["ssl.ca.location"]
    if "ssl.certificate.location" in config:
        settings["ssl_certfile"] = config["ssl.certificate.location"]
        settings["ssl_keyfile"] = config["ssl.key.location"]
    return settings


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kafka_python(secured_broker, tls_files, topic, case):
    config = kafka_python_settings(settings(secured_broker, tls_files, case))
    label = f"kafka-python-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(acks="all", **config)
    for value in values(label):
        producer.send(topic, value, key=label.encode())
    producer.flush(TIMEOUT)
    producer.close()
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=1000, **config)
    partition = KafkaPythonTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 3 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen += [r.value for r in records if r.key == label.encode()]
    consumer.close()
    assert seen == values(label)


# -- aiokafka ----------------------------------------------------------------------------


def aiokafka_settings(config: dict[str, str]) -> dict:
    settings = python_client_settings(config)
    if "ssl.ca.location" in config:
        settings["ssl_context"] = create_ssl_context(
            cafile=config["ssl.ca.location"],
            certfile=config.get("ssl.certificate.location"),
            keyfile=config.get("ssl.key.location"),
        )
    return settings


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_aiokafka(secured_broker, tls_files, topic, case):
    config = aiokafka_settings(settings(secured_broker, tls_files, case))
    label = f"aiokafka-{uuid.uuid4().hex[:6]}"

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **config)
        await producer.start()
        try:
            for value in values(label):
                await producer.send_and_wait(topic, value, key=label.encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, **config)
        await consumer.start()
        try:
            consumer.assign([KafkaPythonTopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            seen: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT
            while len(seen) < 3 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    seen += [r.value for r in records if r.key == label.encode()]
            return seen
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == values(label)


# -- kcat --------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_over_sasl_ssl(secured_broker, tls_files, topic, mechanism):
    user = CAROL if mechanism == "PLAIN" else ALICE
    config = client_config(secured_broker, "SASL_SSL", tls_files, mechanism, user)
    options = ["-b", config.pop("bootstrap.servers")]
    config["sasl.mechanisms"] = config.pop("sasl.mechanism")
    for key, value in config.items():
        options += ["-X", f"{key}={value}"]
    label = f"kcat-{mechanism}-{uuid.uuid4().hex[:6]}"
    lines = "".join(f"{label}:{value.decode()}\n" for value in values(label))
    subprocess.run(
        ["kcat", *options, "-P", "-t", topic, "-K", ":"],
        input=lines.encode(),
        check=True,
        timeout=TIMEOUT,
    )
    out = subprocess.run(
        ["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k=%s\\n"],
        capture_output=True,
        check=True,
        timeout=TIMEOUT,
    ).stdout.decode()
    assert [line.split("=", 1)[1] for line in out.splitlines() if line.startswith(label)] == [
        value.decode() for value in values(label)
    ]
