"""``onceflow console`` against a broker with SASL_SSL (SCRAM-SHA-512 over TLS) and the
StandardAuthorizer, reached with --command-config as every command is: the super user
sees every page; a principal without ACLs is told on the page what it may not do, and
cannot write, even with --allow-writes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from onceflow.broker.process import BrokerProcess
from tests.integration.security.secured import ADMIN, ALICE, client_config, start_authorizing_broker
from tests.kit.clients import new_topic
from tests.kit.console import (
    assert_principal_without_acls_is_refused,
    assert_super_user_sees_every_page,
    running_console,
)

SASL_SSL = {"listener": "SASL_SSL", "mechanism": "SCRAM-SHA-512"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls_files) -> Iterator[BrokerProcess]:
    process = start_authorizing_broker(tmp_path_factory.mktemp("console-acls"), tls_files)
    yield process
    process.stop()


def command_config(directory, name: str, conf: dict[str, str]) -> str:
    path = directory / f"{name}.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return str(path)


def test_the_console_over_sasl_ssl_shows_what_each_principal_may_see(broker, tls_files, tmp_path):
    admin = client_config(broker, tls=tls_files, user=ADMIN, **SASL_SSL)
    alice = client_config(broker, tls=tls_files, user=ALICE, **SASL_SSL)
    topic = new_topic(admin["bootstrap.servers"], "console-secret", client=admin)
    producer = Producer({**admin, "transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"held", partition=0)
    producer.flush(30)
    as_admin = ("--command-config", command_config(tmp_path, "admin", admin))
    with running_console(*as_admin) as base:
        assert_super_user_sees_every_page(base, topic)
    as_alice = ("--command-config", command_config(tmp_path, "alice", alice), "--allow-writes")
    with running_console(*as_alice) as base:
        assert_principal_without_acls_is_refused(base, topic)
    producer.abort_transaction(30)
