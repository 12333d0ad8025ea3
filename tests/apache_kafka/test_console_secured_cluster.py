"""``onceflow console`` against a 3-node Apache Kafka cluster whose clients must use
SASL_SSL (SCRAM-SHA-512 over TLS) and whose StandardAuthorizer decides what they see,
reached with --command-config: the super user sees every page and the open transaction;
a principal without ACLs is told on each page what it may not see."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import serialization

from onceflow.kafka_cluster import KafkaCluster, SecuredListener
from onceflow.testing import APACHE_KAFKA_GROUP, unique_name
from tests.integration.security.secured import ADMIN, ALICE, KEY_PASSWORD, make_tls_files
from tests.kit.console import (
    assert_principal_without_acls_is_refused,
    assert_super_user_sees_every_page,
    get,
    running_console,
)
from tests.kit.wait import wait_until

pytestmark = pytest.mark.xdist_group(APACHE_KAFKA_GROUP)  # one cluster at a time


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[KafkaCluster, object]]:
    tls = make_tls_files(tmp_path_factory.mktemp("kafka-certificates"))
    listener = SecuredListener(
        keystore=unencrypted_keystore(tls.server_keystore),
        truststore=tls.ca,
        scram_users=(("SCRAM-SHA-512", *ADMIN), ("SCRAM-SHA-512", *ALICE)),
    )
    cluster = KafkaCluster(3, directory=tmp_path_factory.mktemp("secured-kafka"), secured=listener)
    cluster.start()
    yield cluster, tls
    cluster.stop(graceful=False)


def unencrypted_keystore(keystore: Path) -> Path:
    """The keystore with its key in plain PKCS#8: Kafka's PEM loader cannot read a PBES2
    (AES) encrypted key ("PBES2 SecretKeyFactory not available")."""
    text = keystore.read_bytes()
    key = serialization.load_pem_private_key(text, password=KEY_PASSWORD.encode())
    plain = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    certificates = text[text.index(b"-----BEGIN CERTIFICATE-----") :]
    path = keystore.with_name("kafka-server.pem")
    path.write_bytes(plain + certificates)
    return path


def settings(cluster: KafkaCluster, tls, user: tuple[str, str]) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap_for("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user[0],
        "sasl.password": user[1],
        "ssl.ca.location": str(tls.ca),
    }


def command_config(path, conf: dict[str, str]) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return str(path)


def test_the_console_over_sasl_ssl_on_apache_kafka(secured, tmp_path):
    cluster, tls = secured
    admin, alice = settings(cluster, tls, ADMIN), settings(cluster, tls, ALICE)
    topic = unique_name("console-secret")
    client = AdminClient(admin)
    client.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    wait_until(lambda: _led(client, topic), 60, what=f"{topic} has a leader")
    # Held open while both consoles are read: under a loaded suite that took over Kafka's
    # default 60 s once, and the coordinator aborted it (the abort below was then fenced).
    producer = Producer(
        {**admin, "transactional.id": f"{topic}-txn", "transaction.timeout.ms": 600_000}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"held", partition=0)
    producer.flush(60)
    as_admin = command_config(tmp_path / "admin.properties", admin)
    with running_console("--command-config", as_admin) as base:
        assert_super_user_sees_every_page(base, topic)
        assert "1 past the LSO" in get(base + f"/topics/{topic}")[1]
    as_alice = command_config(tmp_path / "alice.properties", alice)
    with running_console("--command-config", as_alice, "--allow-writes") as base:
        assert_principal_without_acls_is_refused(base, topic)
    producer.abort_transaction(60)


def _led(client: AdminClient, topic: str) -> bool:
    found = client.list_topics(topic, timeout=10).topics.get(topic)
    return found is not None and found.error is None and found.partitions[0].leader >= 0
