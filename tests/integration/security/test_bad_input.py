"""Bad input on secured listeners: a clear error, the connection closed, the broker
unaffected and nothing written.

Wrong password, unknown user, unknown mechanism, a request before authentication, a
plaintext client on a TLS port, expired and untrusted certificates, SASL frames of absurd
size; repeated failures from one address are answered ever more slowly.
"""

from __future__ import annotations

import re
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i64

from onceflow.broker.process import BrokerProcess
from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import request_class
from onceflow.protocol.errors import ErrorCode
from onceflow.security.plain import plain_message
from onceflow.security.scram import ScramClientExchange
from tests.integration.security.secured import ALICE, TlsFiles, client_config, start_secured_broker
from tests.kit.wire import metadata

TIMEOUT = 15
DELAY_LOGGED = re.compile(r"Failed authentication with .*; closing after (\d+) ms")
FAILED = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls_files) -> Iterator[BrokerProcess]:
    """Failures answered at once, so that the tests here do not slow each other down."""
    process = start_secured_broker(
        tmp_path_factory.mktemp("bad-input"),
        tls_files,
        **{"connection.failed.authentication.delay.ms": "0"},
    )
    yield process
    process.stop()


@pytest.fixture(scope="module")
def topic(broker) -> str:
    name = f"untouched-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(TIMEOUT)
    return name


def closed(client: WireClient) -> bool:
    """Whether the broker has closed the connection (EOF or reset within 5 s)."""
    client.sock.settimeout(5)
    try:
        return client.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


def authenticate(broker: BrokerProcess, mechanism: str, user: str, password: str):
    """Raw SaslHandshake + SaslAuthenticate; (last response, connection closed after)."""
    client = WireClient(broker.bootstrap_for("SASL_PLAINTEXT"))
    with client:
        handshake = client.request(request_class(17, 1), mechanism=mechanism)
        assert handshake.error_code == ErrorCode.none
        authenticate = request_class(36, 2)
        if mechanism == "PLAIN":
            response = client.request(authenticate, auth_bytes=plain_message(user, password))
        else:
            scram = ScramClientExchange(mechanism, user, password)
            first = client.request(authenticate, auth_bytes=scram.first())
            assert first.error_code == ErrorCode.none
            response = client.request(authenticate, auth_bytes=scram.final(first.auth_bytes))
        return response, closed(client)


def healthy(broker: BrokerProcess, topic: str) -> int:
    """The broker still serves an authenticated client; the topic's end offset."""
    conf = client_config(broker, "SASL_PLAINTEXT", None, "SCRAM-SHA-256", ALICE)
    with WireClient.from_config(conf) as client:
        response = client.request(
            ListOffsetsRequest,
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        ListOffsetsPartition(
                            partition_index=i32(0),
                            current_leader_epoch=i32(-1),
                            timestamp=i64(-1),
                        ),
                    ),
                ),
            ),
        )
    return response.topics[0].partitions[0].offset


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-256", "alice", "wrong-password"),
        ("SCRAM-SHA-256", "nobody", "alice-secret"),
        ("SCRAM-SHA-512", "alice", "wrong-password"),
        ("PLAIN", "carol", "wrong-password"),
        ("PLAIN", "nobody", "carol-secret"),
    ],
)
def test_wrong_credentials_fail_alike_and_close(broker, topic, mechanism, user, password):
    response, was_closed = authenticate(broker, mechanism, user, password)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == FAILED.format(mechanism)  # no hint of what was wrong
    assert was_closed
    assert healthy(broker, topic) == 0


def test_failed_client_writes_nothing(broker, topic, tls_files):
    conf = client_config(broker, "SASL_SSL", tls_files, "SCRAM-SHA-512", ("alice", "wrong"))
    errors = []
    producer = Producer(
        {**conf, "message.timeout.ms": 3000, "error_cb": lambda error: errors.append(error)}
    )
    producer.produce(topic, b"must not arrive")
    producer.flush(TIMEOUT)
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors)
    assert healthy(broker, topic) == 0
    assert "Failed authentication with" in broker.log_path.read_text()


def test_unknown_mechanism_is_refused_with_the_enabled_ones(broker, topic):
    with WireClient(broker.bootstrap_for("SASL_PLAINTEXT")) as client:
        response = client.request(request_class(17, 1), mechanism="GSSAPI")
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert closed(client)
    assert healthy(broker, topic) == 0


def test_request_before_authentication_closes_the_connection(broker, topic):
    with (
        WireClient(broker.bootstrap_for("SASL_PLAINTEXT")) as client,
        pytest.raises(ConnectionError),
    ):
        metadata(client)
    assert healthy(broker, topic) == 0
    assert "request before SASL authentication" in broker.log_path.read_text()


@pytest.mark.parametrize("size", [600 * 1024, 200 * 1024 * 1024, 2**31 - 1])
def test_absurd_frame_before_authentication_closes_the_connection(broker, topic, size):
    """Above sasl.server.max.receive.size (512 KiB) before authentication: closed at
    once, without the broker waiting for (or allocating) the announced bytes."""
    with socket.create_connection(
        ("127.0.0.1", int(broker.bootstrap_for("SASL_PLAINTEXT").split(":")[1])), timeout=5
    ) as sock:
        sock.sendall(struct.pack(">i", size) + b"\0" * 64)
        assert sock.recv(1) == b""
    assert healthy(broker, topic) == 0


def test_absurd_sasl_token_closes_the_connection(broker, topic):
    with WireClient(broker.bootstrap_for("SASL_PLAINTEXT")) as client:
        assert client.request(request_class(17, 1), mechanism="PLAIN").error_code == 0
        with pytest.raises(ConnectionError):
            client.request(request_class(36, 2), auth_bytes=b"\0" * (600 * 1024))
    assert healthy(broker, topic) == 0


def test_plaintext_client_on_a_tls_port(broker, topic):
    with WireClient(broker.bootstrap_for("SSL")) as client, pytest.raises(ConnectionError):
        metadata(client)
    admin = AdminClient(
        {"bootstrap.servers": broker.bootstrap_for("SASL_SSL"), "security.protocol": "PLAINTEXT"}
    )
    with pytest.raises(Exception, match=r"(?i)timed out|transport|disconnect"):
        admin.list_topics(timeout=3)
    assert healthy(broker, topic) == 0
    assert "TLS handshake with" in broker.log_path.read_text()


def test_untrusted_server_certificate_is_refused_by_the_client(broker, tls_files: TlsFiles):
    conf = client_config(broker, "SSL", tls_files)
    conf["ssl.ca.location"] = str(tls_files.untrusted_ca)
    with pytest.raises(ConnectionError, match=r"TLS handshake failed.*certificate verify failed"):
        WireClient.from_config(conf)


@pytest.mark.parametrize("kind", ["expired", "untrusted"])
def test_bad_client_certificate_is_refused(broker, topic, tls_files: TlsFiles, kind):
    conf = client_config(broker, "SSL", tls_files)
    certificate, key = (
        (tls_files.expired_certificate, tls_files.expired_key)
        if kind == "expired"
        else (tls_files.untrusted_certificate, tls_files.untrusted_key)
    )
    conf["ssl.certificate.location"], conf["ssl.key.location"] = str(certificate), str(key)
    # With TLS 1.3 the client's handshake ends first; the refusal comes on the first read.
    with pytest.raises((ConnectionError, ssl.SSLError)), WireClient.from_config(conf) as client:
        metadata(client)
    assert healthy(broker, topic) == 0
    expected = "certificate has expired" if kind == "expired" else "certificate verify failed"
    assert expected in broker.log_path.read_text()


def test_repeated_failures_from_one_address_are_slowed_down(tmp_path, tls_files):
    broker = start_secured_broker(
        tmp_path, tls_files, **{"connection.failed.authentication.delay.ms": "100"}
    )
    try:
        took = []
        for _ in range(5):
            started = time.monotonic()
            response, _ = authenticate(broker, "PLAIN", "carol", "wrong")
            took.append(time.monotonic() - started)
            assert response.error_code == ErrorCode.sasl_authentication_failed
        # the broker's own account of each delay; each answer came no sooner (how much
        # later depends on the machine: 0.4 s for the first one under a loaded make test)
        delays = [int(ms) for ms in DELAY_LOGGED.findall(broker.log_path.read_text())]
        assert delays == [100, 200, 400, 800, 1600], delays
        assert all(took[n] >= delays[n] / 1000 for n in range(5)), (took, delays)
    finally:
        broker.stop()
