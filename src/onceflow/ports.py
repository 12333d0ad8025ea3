"""Free loopback ports outside the kernel's ephemeral range.

A restarted node must get its old ports back; a port from the ephemeral range could by
then be the local end of some client's connection, so ports come from below that range.

A port is free when it is chosen and taken a moment later, by a server that is still
starting (a broker's process, a JVM): meanwhile another process (a parallel test) could
choose it too. So every choice is noted in a folder shared by the machine's processes,
under a lock, with the choosing process's id. A port is not chosen again while that
process lives, nor within ``RESERVED_S`` of its choice: a node that is down and comes back
on its old port (a cluster's node outage, a broker restart) keeps it however long ago it
was chosen.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_LOWEST = 10000
RESERVED_S = 300.0  # longer than any server here takes to bind what it was given
_CHOSEN = Path(tempfile.gettempdir()) / "onceflow-ports"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    low, _ = _ephemeral_range()
    candidates = list(range(_LOWEST, max(low, _LOWEST + 1000)))
    random.shuffle(candidates)
    ports: list[int] = []
    with _choosing() as chosen_lately:
        for port in candidates:
            if len(ports) == count:
                break
            if port not in chosen_lately and is_free(port, host):
                ports.append(port)
                (_CHOSEN / str(port)).write_text(str(os.getpid()))
    if len(ports) < count:
        raise OSError(f"found only {len(ports)} of {count} free ports on {host}")
    return ports


@contextmanager
def _choosing() -> Iterator[set[int]]:
    """The machine-wide lock on choosing ports, and the ports still reserved (the notes of
    others are removed)."""
    _CHOSEN.mkdir(exist_ok=True)
    lock = os.open(_CHOSEN / ".lock", os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lately, now = set(), time.time()
        for note in _CHOSEN.iterdir():
            if not note.name.isdigit():
                continue
            try:
                if now - note.stat().st_mtime < RESERVED_S or _alive(note.read_text()):
                    lately.add(int(note.name))
                else:
                    note.unlink()
            except FileNotFoundError:
                continue
        yield lately
    finally:
        os.close(lock)  # (releases the lock)


def _alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
