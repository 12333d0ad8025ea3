"""onceflow's own protocol client (WireClient) over every listener, from librdkafka-style
settings, with several bootstrap hosts."""

from __future__ import annotations

import pytest

from onceflow.ports import free_port
from onceflow.protocol.client import AuthenticationError, WireClient, parse_bootstrap
from onceflow.protocol.errors import ErrorCode
from tests.integration.security.secured import ALICE, BOB, PLAIN_USERS, client_config
from tests.kit.wire import metadata

CAROL = ("carol", PLAIN_USERS["carol"])
CASES = [
    ("PLAINTEXT", None, None, False),
    ("SSL", None, None, False),
    ("SSL", None, None, True),
    ("SASL_PLAINTEXT", "PLAIN", CAROL, False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", ALICE, False),
    ("SASL_SSL", "SCRAM-SHA-512", BOB, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1] or 'none'}")
def test_from_config_on_every_listener(secured_broker, tls_files, case):
    listener, mechanism, user, certificate = case
    conf = client_config(secured_broker, listener, tls_files, mechanism, user, certificate)
    conf["group.id"] = "ignored: a setting for other clients"
    with WireClient.from_config(conf) as client:
        response = metadata(client)
    broker = response.brokers[0]
    assert f"{broker.host}:{broker.port}" == secured_broker.bootstrap_for(listener)


def test_bootstrap_list_skips_hosts_that_do_not_answer(secured_broker, tls_files):
    conf = client_config(secured_broker, "SASL_SSL", tls_files, "SCRAM-SHA-256", ALICE)
    conf["bootstrap.servers"] = (
        f"no-such-host.invalid:9092,127.0.0.1:{free_port()},SASL_SSL://{conf['bootstrap.servers']}"
    )
    with WireClient.from_config(conf) as client:
        assert metadata(client).cluster_id
        assert client.address == secured_broker.bootstrap_for("SASL_SSL")


def test_no_bootstrap_host_answers_names_each_failure():
    with pytest.raises(ConnectionError) as raised:
        WireClient(f"no-such-host.invalid:9092,127.0.0.1:{free_port()}", timeout=2)
    message = str(raised.value)
    assert "no-such-host.invalid:9092" in message and "refused" in message.lower()


def test_wrong_password_is_an_authentication_error(secured_broker, tls_files):
    conf = client_config(secured_broker, "SASL_PLAINTEXT", tls_files, "SCRAM-SHA-512", ALICE)
    conf["sasl.password"] = "not-the-password"
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        WireClient.from_config(conf)


def test_sasl_jaas_config_gives_the_credentials(secured_broker, tls_files):
    conf = {
        "bootstrap.servers": secured_broker.bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="alice" password="alice-secret";',
    }
    with WireClient.from_config(conf) as client:
        assert all(t.error_code == ErrorCode.none for t in metadata(client).topics)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({}, "bootstrap.servers is required"),
        ({"bootstrap.servers": "a:1", "security.protocol": "TLS"}, "unknown security protocol"),
        (
            {"bootstrap.servers": "a:1", "security.protocol": "SASL_SSL"},
            "sasl.mechanism GSSAPI is not supported",
        ),
        (
            {
                "bootstrap.servers": "a:1",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
            },
            "needs sasl.username and sasl.password",
        ),
        (
            {
                "bootstrap.servers": "a:1",
                "security.protocol": "SSL",
                "ssl.ca.location": "/no/such/ca.pem",
            },
            "ssl.ca.location: no such file",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused_before_connecting(conf, message):
    with pytest.raises(ValueError, match=message):
        WireClient.from_config(conf)


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, SASL_SSL://b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]
    with pytest.raises(ValueError, match="not HOST:PORT"):
        parse_bootstrap("a")
