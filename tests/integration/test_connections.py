"""What a connection costs and how many a broker takes: idle connections are cheap on
every listener, memory comes back after they close, and Kafka's connection limits and
idle expiry hold while other clients keep producing and consuming."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest
import trustme

from onceflow.broker.process import BrokerProcess
from tests.integration.connections import (
    answers_api_versions,
    closed_by_broker,
    connect,
    idle_burst,
    raise_open_files_limit,
    round_trip,
    rss_kib,
)

IDLE_CONNECTIONS = 300
MAX_BYTES_PER_IDLE_CONNECTION = 64 * 1024
# A second burst reuses what the first freed. A closed connection must be freed when it
# closes, not by the cyclic garbage collector: TLS state left in a cycle grew each burst by
# 10-20 KB per connection until a full collection.
SECOND_BURST_BYTES_PER_CONNECTION = 4 * 1024
SETTLE_SECONDS = 1.0  # for the broker to accept (or close) what it was given


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def start(directory: Path, ca: trustme.CA, **config: str) -> BrokerProcess:
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = directory / "server.pem"
    keystore.write_bytes(
        server.private_key_pem.bytes() + b"".join(blob.bytes() for blob in server.cert_chain_pems)
    )
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(keystore),
        **config,
    }
    return BrokerProcess(directory / "data", config=settings).start()


@pytest.mark.parametrize(
    ("listener", "handshake"),
    [("PLAINTEXT", False), ("SASL_SSL", False), ("SASL_SSL", True)],
    ids=["plaintext", "sasl-ssl-before-handshake", "sasl-ssl-after-tls-handshake"],
)
def test_idle_connections_are_cheap_and_their_memory_comes_back(tmp_path, ca, listener, handshake):
    raise_open_files_limit(IDLE_CONNECTIONS + 512)
    context = None
    if handshake:
        context = ssl.create_default_context()
        ca.configure_trust(context)
    broker = start(tmp_path, ca)
    address = broker.bootstrap_for(listener)
    try:
        time.sleep(SETTLE_SECONDS)
        before = rss_kib(broker.pid)
        during, after = idle_burst(broker.pid, address, IDLE_CONNECTIONS, context)
        per_connection = (during - before) * 1024 / IDLE_CONNECTIONS
        assert per_connection < MAX_BYTES_PER_IDLE_CONNECTION, (
            f"{per_connection / 1024:.1f} KB per idle {listener} connection "
            f"(RSS {before} -> {during} KiB)"
        )
        # Python and malloc keep some freed memory for reuse: the broker's memory after the
        # close stays within the same bound, and a second burst reuses it.
        assert (after - before) * 1024 < IDLE_CONNECTIONS * MAX_BYTES_PER_IDLE_CONNECTION, (
            f"RSS {before} KiB before, {during} KiB with, {after} KiB after the connections"
        )
        again, _ = idle_burst(broker.pid, address, IDLE_CONNECTIONS, context)
        assert (again - after) * 1024 < IDLE_CONNECTIONS * SECOND_BURST_BYTES_PER_CONNECTION, (
            f"a second burst grew RSS from {after} to {again} KiB"
        )
        round_trip(broker.bootstrap_for("PLAINTEXT"))
    finally:
        broker.stop()


def test_a_connection_over_the_per_ip_limit_is_closed_and_others_keep_working(tmp_path, ca):
    # The idle connections come from 127.0.0.2; the real clients from 127.0.0.1 (override).
    broker = start(
        tmp_path,
        ca,
        **{"max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.1:100"},
    )
    try:
        address = broker.bootstrap_for("PLAINTEXT")
        allowed = [connect(address, source="127.0.0.2") for _ in range(3)]
        assert all(answers_api_versions(sock) for sock in allowed)
        over = connect(address, source="127.0.0.2")
        assert closed_by_broker(over, timeout=5)
        over.close()
        # The same address counts on every listener.
        over_tls = connect(broker.bootstrap_for("SASL_SSL"), source="127.0.0.2")
        assert closed_by_broker(over_tls, timeout=5)
        over_tls.close()
        round_trip(address)
        assert all(answers_api_versions(sock) for sock in allowed)
        allowed.pop().close()  # a slot frees: the address may connect again
        time.sleep(SETTLE_SECONDS)
        again = connect(address, source="127.0.0.2")
        assert answers_api_versions(again)
        for sock in [*allowed, again]:
            sock.close()
    finally:
        broker.stop()


def test_a_full_broker_accepts_again_when_a_connection_closes(tmp_path, ca):
    broker = start(tmp_path, ca, **{"max.connections": "3"})
    try:
        address = broker.bootstrap_for("PLAINTEXT")
        first = [connect(address) for _ in range(3)]
        assert all(answers_api_versions(sock) for sock in first)
        waiting = connect(address)  # the kernel queues it; the broker does not accept it
        assert not answers_api_versions(waiting, timeout=2)
        first.pop().close()
        assert answers_api_versions(waiting, timeout=10)  # accepted once a slot freed
        assert all(answers_api_versions(sock) for sock in first)
        for sock in [*first, waiting]:
            sock.close()
    finally:
        broker.stop()


def test_a_listener_limit_leaves_the_other_listeners_alone(tmp_path, ca):
    broker = start(tmp_path, ca, **{"listener.name.sasl_ssl.max.connections": "2"})
    try:
        limited = broker.bootstrap_for("SASL_SSL")
        held = [connect(limited) for _ in range(2)]
        waiting = connect(limited)
        assert not closed_by_broker(waiting, timeout=2)  # queued, neither served nor closed
        round_trip(broker.bootstrap_for("PLAINTEXT"))
        held.pop().close()
        time.sleep(SETTLE_SECONDS)
        third = connect(limited)
        assert not closed_by_broker(third, timeout=1)
        for sock in [*held, waiting, third]:
            sock.close()
    finally:
        broker.stop()


def test_idle_and_unauthenticated_connections_are_closed(tmp_path, ca):
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    broker = start(tmp_path, ca, **{"connections.max.idle.ms": "1500", "listeners": listeners})
    try:
        idle = connect(broker.bootstrap_for("PLAINTEXT"))
        tls_idle = connect(broker.bootstrap_for("SASL_SSL"))  # never starts its handshake
        busy = connect(broker.bootstrap_for("PLAINTEXT"))
        unauthenticated = connect(broker.bootstrap_for("SASL_PLAINTEXT"))
        answered = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # a request every 0.5 s keeps a connection open
            assert answers_api_versions(busy)
            answered.append(answers_api_versions(unauthenticated, timeout=1))
            time.sleep(0.5)
        assert closed_by_broker(idle, timeout=3)
        assert closed_by_broker(tls_idle, timeout=3)
        # ... but not one that does not authenticate within connections.max.idle.ms
        assert answered[0] and not answered[-1], answered
        assert answers_api_versions(busy)
        round_trip(broker.bootstrap_for("PLAINTEXT"))
        for sock in (idle, tls_idle, busy, unauthenticated):
            sock.close()
    finally:
        broker.stop()
