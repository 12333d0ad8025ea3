"""Large requests and responses over TLS: megabyte-sized Produce requests and Fetch
responses cross the broker's in-memory TLS layer record by record, intact and in order."""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.security.secured import ALICE, client_config

TIMEOUT = 30
RECORDS = 12
RECORD_BYTES = 900_000  # under message.max.bytes (1 MiB): each batch is a large frame


@pytest.mark.parametrize(
    ("listener", "mechanism", "user"),
    [("SSL", None, None), ("SASL_SSL", "SCRAM-SHA-256", ALICE)],
    ids=["ssl", "sasl-ssl"],
)
def test_megabyte_records_cross_tls_intact(secured_broker, tls_files, listener, mechanism, user):
    topic = f"tls-large-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured_broker.bootstrap_for("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT)
    config = client_config(secured_broker, listener, tls_files, mechanism, user, False)
    values = [
        hashlib.sha256(f"{topic}-{n}".encode()).digest() * (RECORD_BYTES // 32)
        for n in range(RECORDS)
    ]
    producer = Producer({**config, "enable.idempotence": True, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            **config,
            "group.id": topic,
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(RECORDS, 0.5):
            assert message.error() is None, message.error()
            seen.append(message.value())
    consumer.close()
    assert len(seen) == RECORDS
    assert seen == values
