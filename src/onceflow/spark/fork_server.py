"""A fork server for the Python processes a local Spark session starts.

For each kind of Python process a query needs, Spark starts a new interpreter: the
executors' daemon, and on the driver the data source's ``create_data_source``,
``plan_data_source_read`` and ``write_into_data_source``, the streaming source runner and
the sink's commit runner. Each imports pyspark, pyarrow and onceflow before it does
anything, one after the other before a query's first micro-batch, and all again after
every restart of the job.

This server imports them once, while the driver's JVM starts, and forks a child for each
``python -m pyspark...`` that Spark asks for. The client (``fork_client.py``, what local
sessions give Spark as its Python) hands the server its standard input, output and error,
its arguments, environment and working directory; it relays signals to the child and
exits as the child exits. The child is the process Spark asked for in all but its parent:
the same descriptors, environment, arguments and directory, the module run as
``__main__``. A request whose environment would have changed how the interpreter starts
or what the preloaded modules did at import (``IMPORT_TIME_VARIABLES``) is refused, and
the client then starts the interpreter itself, as it does when no server is there.

The server runs as ``python -m onceflow.spark.fork_server SOCKET`` with a pipe on its
standard input: when the pipe closes (the driver ended, however it ended) it stops
accepting, gives its children ``ORPHAN_GRACE_S`` to end with their JVM, and exits. On
Linux its socket has a name in the abstract namespace (``@NAME``: nothing is left behind
when the server is killed) and it serves only its own user's processes; elsewhere it is a
file in a directory only its user can enter.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import secrets
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from onceflow.spark.fork_client import socket_address

# Environment variables read when the interpreter starts or when the preloaded modules are
# imported: a child forked from the server has the server's values in effect.
IMPORT_TIME_VARIABLES = (
    "PYTHONHASHSEED",
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONOPTIMIZE",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS",
    "PYTHONFAULTHANDLER",
    "PYTHONDEVMODE",
    "PYTHONSAFEPATH",
    "PYSPARK_ENABLE_NAMEDTUPLE_PATCH",
    "SPARK_TESTING",
)
PRELOADED = (
    "pyspark.daemon",
    "pyspark.worker",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write",
    "pyspark.sql.worker.python_streaming_sink_runner",
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyarrow",
    "confluent_kafka",
    "onceflow.spark.kafka_source.stream_reader",
    "onceflow.spark.kafka_source.batch_reader",
    "onceflow.spark.kafka_source.tasks",
    "onceflow.spark.kafka_sink.data_source",
    "onceflow.spark.database_sink.data_source",
)
MODULE_PREFIXES = ("pyspark.",)  # only Spark's own `python -m pyspark...` processes are forked
ORPHAN_GRACE_S = 10.0
ACCEPTED, REFUSED = b"+", b"-"
STATUS = struct.Struct("!i")  # the child's exit code, or minus the signal that ended it
LENGTH = struct.Struct("!I")


def import_time_environment(env: dict[str, str]) -> dict[str, str]:
    return {name: env[name] for name in IMPORT_TIME_VARIABLES if name in env}


def pythonpath_entries(env: dict[str, str]) -> list[str]:
    """``PYTHONPATH`` as the launcher leaves it: without Spark's ``pyspark.zip``."""
    entries = env.get("PYTHONPATH", "").split(os.pathsep)
    return [e for e in entries if e and not e.endswith("/python/lib/pyspark.zip")]


@dataclass
class Request:
    argv: list[str]
    env: dict[str, str]
    cwd: str

    def module(self, prefixes: tuple[str, ...]) -> str | None:
        """The module of ``-m MODULE ...`` if it starts with one of ``prefixes``."""
        if len(self.argv) >= 2 and self.argv[0] == "-m" and self.argv[1].startswith(prefixes):
            return self.argv[1]
        return None


@dataclass
class Client:
    connection: socket.socket
    child: int | None = None


def receive_request(connection: socket.socket) -> tuple[Request, list[int]]:
    """The client's descriptors (standard input, output, error) and its request."""
    fds = array.array("i")
    message, ancillary, _flags, _address = connection.recvmsg(
        LENGTH.size, socket.CMSG_SPACE(3 * fds.itemsize)
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if len(message) != LENGTH.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ConnectionError("a request without its length or its three descriptors")
    (length,) = LENGTH.unpack(message)
    payload = bytearray()
    while len(payload) < length:
        chunk = connection.recv(length - len(payload))
        if not chunk:
            raise ConnectionError("the client left mid-request")
        payload += chunk
    data = json.loads(payload)
    return Request(list(data["argv"]), dict(data["env"]), str(data["cwd"])), list(fds)


class ForkServer:
    def __init__(self, path: str, prefixes: tuple[str, ...] = MODULE_PREFIXES) -> None:
        self.path = path
        self.prefixes = prefixes
        self.environment = import_time_environment(dict(os.environ))
        self.base_path = [p for p in sys.path[1:] if p not in pythonpath_entries(dict(os.environ))]
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.clients: dict[int, Client] = {}  # by the connection's descriptor
        self.children: dict[int, Client] = {}  # by the child's pid
        self.wakeup_read, self.wakeup_write = os.pipe()
        self.accepting = True
        # Bound before the preload: a client that comes meanwhile waits in the backlog.
        self.listener.bind(socket_address(self.path))
        self.listener.listen(64)

    def serve(self) -> None:
        os.set_blocking(self.wakeup_write, False)
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the pipe
        self.selector.register(self.listener, selectors.EVENT_READ, "listener")
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
        self.selector.register(self.wakeup_read, selectors.EVENT_READ, "wakeup")
        orphaned_at: float | None = None
        while self.accepting or self.children:
            timeout = None
            if orphaned_at is not None:
                timeout = orphaned_at + ORPHAN_GRACE_S - time.monotonic()
                if timeout <= 0:
                    for pid in self.children:
                        kill_child(pid, signal.SIGKILL)
                    break
            for key, _events in self.selector.select(timeout):
                if key.data == "listener":
                    self.accept()
                elif key.data == "parent":
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.stop_accepting()
                        orphaned_at = time.monotonic()
                elif key.data == "wakeup":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wakeup_read, 4096)
                else:
                    self.from_client(key.data)
            self.reap()
        self.stop_accepting()

    def stop_accepting(self) -> None:
        if self.accepting:
            self.accepting = False
            self.selector.unregister(self.listener)
            self.selector.unregister(sys.stdin.fileno())
            self.listener.close()
            if not self.path.startswith("@"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        if not same_user(connection):
            connection.close()
            return
        try:
            request, fds = receive_request(connection)
        except (OSError, ValueError, KeyError, TypeError):
            connection.close()
            return
        try:
            module = request.module(self.prefixes)
            if module is None or import_time_environment(request.env) != self.environment:
                connection.sendall(REFUSED)
                connection.close()
                return
            client = Client(connection)
            pid = self.fork(request, fds, connection)
        finally:
            for fd in fds:
                os.close(fd)
        client.child = pid
        self.children[pid] = client
        self.clients[connection.fileno()] = client
        self.selector.register(connection, selectors.EVENT_READ, connection.fileno())
        connection.sendall(ACCEPTED + STATUS.pack(pid))

    def fork(self, request: Request, fds: list[int], connection: socket.socket) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                self.become_child(request, fds, connection)
            finally:
                os._exit(1)  # become_child never returns; this only guards against a bug
        return pid

    def become_child(self, request: Request, fds: list[int], connection: socket.socket) -> None:
        """In the child: none of the server's descriptors (a client whose server died must
        see its connection end), the client's standard streams, then its module."""
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        connection.close()
        for client in self.clients.values():
            client.connection.close()
        for fd in (self.wakeup_read, self.wakeup_write):
            os.close(fd)
        with contextlib.suppress(OSError):
            self.listener.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        run_as_main(request, self.base_path)

    def from_client(self, descriptor: int) -> None:
        """A signal to relay (one byte each), or the client's end: its child goes too."""
        client = self.clients[descriptor]
        try:
            data = client.connection.recv(64)
        except OSError:
            data = b""
        if client.child is None:
            return
        if not data:
            kill_child(client.child, signal.SIGKILL)
            self.forget(client)
            return
        for number in data:
            kill_child(client.child, number)

    def reap(self) -> None:
        while True:  # every ended child, also those whose client left first
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            client = self.children.pop(pid, None)
            if client is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                client.connection.sendall(STATUS.pack(code))
            client.child = None
            self.forget(client)

    def forget(self, client: Client) -> None:
        if client.child is not None:
            self.children.pop(client.child, None)
        descriptor = client.connection.fileno()
        if descriptor in self.clients:
            self.selector.unregister(client.connection)
            del self.clients[descriptor]
        client.connection.close()


def same_user(connection: socket.socket) -> bool:
    """The client runs as this server's user. A name in the abstract namespace has no file
    permissions: anyone on the machine could connect, and have their module run as us."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # no abstract names either: the socket's directory is ours alone (0700)
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid == os.getuid()


def kill_child(pid: int, number: int) -> None:
    """Signal the child; its whole group when it leads one (Spark's daemon makes its own
    and its forked workers are in it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, number)
        else:
            os.kill(pid, number)


def run_as_main(request: Request, base_path: list[str]) -> None:
    """In the forked child: what ``python -m MODULE ARGS`` would do, then exit."""
    code = 0
    try:
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        sys.path[:] = [request.cwd, *pythonpath_entries(request.env), *base_path]
        sys.argv = [request.argv[1], *request.argv[2:]]
        atexit._clear()
        # As `python -m` finds it: not imported yet (its imports are, which is the point).
        sys.modules.pop(request.argv[1], None)
        runpy.run_module(request.argv[1], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_code(exit_.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def exit_code(code: object) -> int:
    """The process exit status ``sys.exit(code)`` gives."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        print(code, file=sys.stderr)
    return 1


def preload() -> None:
    """Import what the children need, then move every object so far out of the garbage
    collector's reach (``gc.freeze``): PySpark's daemon runs a full ``gc.collect()`` after
    every task of a reused worker, which walked the 50,000-odd objects of these imports
    each time (11-16 ms a task, most of a reused worker's time between small micro-batches'
    tasks). Frozen, a child's collections walk only what the child made. (Garbage the
    imports left is collected first: frozen, it would never be.)"""
    for name in PRELOADED:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    gc.collect()
    gc.freeze()


_started: subprocess.Popen[bytes] | None = None  # this process's server ...
_started_path = ""  # ... and its socket


def start_fork_server(python: str = sys.executable) -> str | None:
    """Start this driver's fork server (once per process); the path of its socket, for the
    session's Python processes (``spark.executorEnv.ONCEFLOW_SPARK_FORK_SERVER``: only
    those of this driver's own session, not the processes of anything else this driver
    starts). Its interpreter starts as Spark starts theirs: ``PYTHONHASHSEED`` as PySpark
    gives its workers (``0`` unless set) and unbuffered. None where it cannot run (not
    POSIX)."""
    global _started, _started_path
    if os.name != "posix" or not hasattr(socket, "AF_UNIX"):
        return None
    if _started is not None and _started.poll() is None:
        return _started_path
    if sys.platform.startswith("linux"):
        path = f"@onceflow-spark-fork-{os.getpid()}-{secrets.token_hex(8)}"
    else:
        path = str(Path(tempfile.mkdtemp(prefix="onceflow-spark-")) / "fork.sock")
    env = {
        **os.environ,
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
        "PYTHONUNBUFFERED": "YES",
        "PYTHONPATH": os.pathsep.join(pythonpath_entries(dict(os.environ))),
    }
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
    _started = subprocess.Popen(
        [python, "-m", "onceflow.spark.fork_server", path],
        stdin=subprocess.PIPE,  # closed when this process ends, however it ends
        stdout=subprocess.DEVNULL,
        env=env,
    )
    _started_path = path
    return path


def main() -> None:
    """``python -m onceflow.spark.fork_server SOCKET [MODULE_PREFIX ...]``"""
    path, *prefixes = sys.argv[1:]
    server = ForkServer(path, tuple(prefixes) or MODULE_PREFIXES)
    preload()
    try:
        server.serve()
    finally:
        if not path.startswith("@"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))


if __name__ == "__main__":
    main()
