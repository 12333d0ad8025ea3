"""The client of the Spark fork server (``fork_server.py``), as Spark's Python.

Run by the local sessions' launcher (``worker_python.py``) as ``python -I -S fork_client.py
-m pyspark.MODULE ARGS`` when a fork server is up (``ONCEFLOW_SPARK_FORK_SERVER`` names its
socket). It sends the server its standard input, output and error, its arguments,
environment and working directory; relays the signals Spark sends it to the forked child;
and exits as the child exited (the same code, or killed by the same signal). If it is
killed itself, the server kills the child. If the server is not there or refuses, it
starts the interpreter with the same arguments instead, as if it had never been asked.

Only the standard library, imported with ``-I -S``: it starts in a few milliseconds.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import struct
import sys

SERVER_VARIABLE = "ONCEFLOW_SPARK_FORK_SERVER"
RELAYED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
ACCEPTED = b"+"
STATUS = struct.Struct("!i")
LENGTH = struct.Struct("!I")


def socket_address(name: str) -> str:
    """The AF_UNIX address of a server named ``name``: ``@NAME`` is a name in Linux's
    abstract namespace (no file to leave behind when the server is killed), else a path."""
    return "\0" + name[1:] if name.startswith("@") else name


def receive_exactly(connection: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def connect(argv: list[str]) -> socket.socket | None:
    """A connection whose server forked the child, or None (no server, or refused)."""
    path = os.environ.get(SERVER_VARIABLE)
    if not path:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(socket_address(path))
        payload = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()})
        data = payload.encode("utf-8", "surrogateescape")
        descriptors = array.array("i", [0, 1, 2])
        connection.sendmsg(
            [LENGTH.pack(len(data))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, descriptors)]
        )
        connection.sendall(data)
        if receive_exactly(connection, 1 + STATUS.size)[:1] != ACCEPTED:
            connection.close()
            return None
    except (OSError, TypeError):
        connection.close()
        return None
    return connection


def relay_until_exit(connection: socket.socket) -> int:
    """Relay signals to the child until it ends; its exit status. The relayed signals are
    blocked until the handlers are in place: the child may already have told the caller it
    runs (on the standard output it shares), and a signal held back is delivered, and
    relayed, when they are unblocked."""

    def relay(number: int, _frame: object) -> None:
        try:
            connection.send(bytes([number]))
        except OSError:
            pass

    for number in RELAYED:
        signal.signal(number, relay)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, RELAYED)
    status = receive_exactly(connection, STATUS.size)
    return 1 if status is None else STATUS.unpack(status)[0]


def main() -> None:
    argv = sys.argv[1:]
    signal.pthread_sigmask(signal.SIG_BLOCK, RELAYED)
    connection = connect(argv)
    if connection is None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, RELAYED)  # the mask outlives exec
        os.execv(sys.executable, [sys.executable, *argv])
    status = relay_until_exit(connection)
    if status < 0:  # killed by a signal: so is this process
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
