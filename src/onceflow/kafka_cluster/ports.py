"""Free loopback ports outside the kernel's ephemeral range.

A restarted node must get its old ports back; a port from the ephemeral range could by
then be the local end of some client's connection, so ports come from below that range.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10000


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    low, _ = _ephemeral_range()
    candidates = list(range(_LOWEST, max(low, _LOWEST + 1000)))
    random.shuffle(candidates)
    ports: list[int] = []
    for port in candidates:
        if len(ports) == count:
            break
        if is_free(port, host):
            ports.append(port)
    if len(ports) < count:
        raise OSError(f"found only {len(ports)} of {count} free ports on {host}")
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """One free port outside the ephemeral range, for a server that starts a moment later
    (a port from the range can meanwhile become the local end of a client connection)."""
    return free_ports(1, host)[0]


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
