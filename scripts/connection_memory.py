"""What idle connections cost a broker: its resident memory before, with N idle
connections open (they connect and send nothing), and after they close.

    .venv/bin/python scripts/connection_memory.py --connections 1500

Starts a broker subprocess with a PLAINTEXT and a SASL_SSL listener (certificates made
by trustme in a temporary directory) for each case: PLAINTEXT, SASL_SSL before the TLS
handshake and SASL_SSL after it (no SASL yet). Loopback only.
"""

from __future__ import annotations

import argparse
import resource
import socket
import ssl
import tempfile
import time
from pathlib import Path

import trustme

from onceflow.broker.process import BrokerProcess


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def settled_rss_kib(pid: int, seconds: float = 1.0) -> int:
    """RSS once the broker has had time to accept or close what it was given."""
    time.sleep(seconds)
    return rss_kib(pid)


def open_idle(address: str, count: int, handshake: ssl.SSLContext | None) -> list[socket.socket]:
    """``count`` connections that send nothing (after the TLS handshake, with a context)."""
    host, port = address.rsplit(":", 1)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)))
        if handshake is not None:
            sock = handshake.wrap_socket(sock, server_hostname="localhost")
        sockets.append(sock)
    return sockets


def raise_open_files_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def tls_broker(directory: Path, ca: trustme.CA) -> BrokerProcess:
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = directory / "server.pem"
    keystore.write_bytes(
        server.private_key_pem.bytes() + b"".join(blob.bytes() for blob in server.cert_chain_pems)
    )
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(keystore),
    }
    return BrokerProcess(directory / "data", config=config)


def measure(
    broker: BrokerProcess, listener: str, count: int, handshake: ssl.SSLContext | None
) -> None:
    pid = broker.pid
    before = settled_rss_kib(pid)
    sockets = open_idle(broker.bootstrap_for(listener), count, handshake)
    during = settled_rss_kib(pid, 2.0)
    for sock in sockets:
        sock.close()
    after = settled_rss_kib(pid, 2.0)
    per_connection = (during - before) * 1024 / count
    label = listener + (" (TLS handshake done)" if handshake else "")
    print(
        f"{label:31} {count} idle connections: RSS {before / 1024:.0f} MB -> "
        f"{during / 1024:.0f} MB ({per_connection / 1024:.1f} KB each); "
        f"after close {after / 1024:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1500)
    args = parser.parse_args()
    raise_open_files_limit(args.connections + 256)
    ca = trustme.CA()
    client = ssl.create_default_context()
    ca.configure_trust(client)
    cases = [("PLAINTEXT", None), ("SASL_SSL", None), ("SASL_SSL", client)]
    for listener, handshake in cases:  # a fresh broker for each: nothing reused
        with tempfile.TemporaryDirectory(prefix="onceflow-conn-") as temporary:
            broker = tls_broker(Path(temporary), ca)
            broker.start()
            try:
                measure(broker, listener, args.connections, handshake)
            finally:
                broker.stop()


if __name__ == "__main__":
    main()
