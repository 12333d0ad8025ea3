"""Raw client connections for the connection tests: idle sockets, an ApiVersions round
trip, the broker's resident memory, and one produce/consume round trip."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from tests.kit.wire import encode, framed


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def open_sockets(pid: int) -> int:
    """How many sockets the process has open (its connections and listening sockets)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def wait_for_open_sockets(pid: int, done: Callable[[int], bool], timeout: float = 60.0) -> int:
    """Wait until the broker's count of open sockets satisfies ``done`` (all connections
    accepted, or all closed); the count."""
    deadline = time.monotonic() + timeout
    while not done(count := open_sockets(pid)):
        assert time.monotonic() < deadline, f"the broker still has {count} open sockets"
        time.sleep(0.05)
    return count


def raise_open_files_limit(needed: int) -> None:
    """For this process and the brokers it starts from now on."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        assert hard >= needed, f"RLIMIT_NOFILE hard limit {hard} < {needed}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def connect(address: str, source: str = "127.0.0.1", timeout: float = 10.0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout, source_address=(source, 0))


def open_idle(
    address: str, count: int, handshake: ssl.SSLContext | None = None
) -> list[socket.socket]:
    """``count`` connections that send nothing (after the TLS handshake, with a context)."""
    sockets = []
    for _ in range(count):
        sock = connect(address)
        if handshake is not None:
            sock = handshake.wrap_socket(sock, server_hostname="localhost")
        sockets.append(sock)
    return sockets


def idle_burst(
    pid: int,
    address: str,
    count: int,
    handshake: ssl.SSLContext | None = None,
    while_open: Callable[[], object] | None = None,
) -> tuple[int, int]:
    """The broker's RSS (KiB) with ``count`` idle connections open (once it has accepted
    them all; then ``while_open`` runs), and after they close (once it has closed them)."""
    sockets_before = open_sockets(pid)
    sockets = open_idle(address, count, handshake)
    wait_for_open_sockets(pid, lambda open_now: open_now >= sockets_before + count)
    during = rss_kib(pid)
    if while_open is not None:
        while_open()
    for sock in sockets:
        sock.close()
    wait_for_open_sockets(pid, lambda open_now: open_now <= sockets_before)
    return during, rss_kib(pid)


def answers_api_versions(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True if the broker answers an ApiVersions request; False if it closed the
    connection or said nothing within ``timeout``."""
    sock.settimeout(timeout)
    try:
        sock.sendall(framed(encode(ApiVersionsRequest(), 7, "connection-test")))
        size = _receive(sock, 4)
        response = _receive(sock, struct.unpack(">i", size)[0]) if size else None
    except (TimeoutError, ConnectionError):
        return False
    return response is not None and struct.unpack_from(">i", response)[0] == 7


def closed_by_broker(sock: socket.socket, timeout: float) -> bool:
    """True if the broker closes ``sock`` within ``timeout`` (no bytes are expected)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _receive(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def round_trip(bootstrap: str, timeout: float = 30.0) -> None:
    """Produce one record to a new topic and consume it back."""
    topic = f"connections-{uuid.uuid4().hex[:8]}"
    value = uuid.uuid4().bytes
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, value)
    assert producer.flush(timeout) == 0, "the record was not delivered"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                assert message.value() == value
                return
        raise AssertionError("the record was not consumed back")
    finally:
        consumer.close()
