"""The fork server of local Spark sessions (onceflow.spark.fork_server): a child forked for
the client is the process the client was asked to start, in all but its parent.

Most tests drive the server and its client directly with a probe module
(tests/spark/fork_probe.py, which the server is told it may fork); the last one checks that
the shared SparkSession's Python workers come from its server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from onceflow.spark import fork_server
from onceflow.spark.fork_client import SERVER_VARIABLE
from onceflow.spark.worker_python import FORK_CLIENT
from tests.kit.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests.spark.fork_probe"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    process = own_server(tmp_path_factory.mktemp("fork"), "pyspark.")
    yield process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(30)


def client(server, *args: str, cwd: Path = ROOT, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(FORK_CLIENT), "-m", PROBE, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**ENV, SERVER_VARIABLE: server.socket, **env},
    )


def report(server, **env: str) -> dict:
    process = client(server, "report", "one", "two", **env)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return json.loads(out)


def test_the_child_has_the_clients_arguments_directory_and_environment(server, tmp_path):
    process = client(server, "report", "one", "two", cwd=tmp_path, PROBE="mine")
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    seen = json.loads(out)
    assert seen["ppid"] == server.pid  # forked by the server
    assert seen["name"] == "__main__"
    assert seen["argv"][0].endswith("fork_probe.py") and seen["argv"][1:] == [
        "report",
        "one",
        "two",
    ]
    assert (seen["cwd"], seen["path0"], seen["probe"]) == (str(tmp_path), str(tmp_path), "mine")


def test_the_preloaded_modules_objects_are_out_of_the_childs_collections(server):
    """PySpark's daemon runs a full gc.collect() after every task of a reused worker: it
    must not walk the tens of thousands of objects of pyspark, pyarrow and onceflow."""
    seen = report(server)
    assert seen["frozen"] > 20_000
    assert seen["tracked"] < seen["frozen"] / 4


def test_standard_streams_and_exit_codes_pass_through(server):
    echo = client(server, "echo")
    assert echo.communicate("a line\n", timeout=30) == ("a line\n", "")
    assert echo.returncode == 0
    exits = client(server, "exit", "3")
    exits.communicate(timeout=30)
    assert exits.returncode == 3
    raises = client(server, "raise")
    _, err = raises.communicate(timeout=30)
    assert raises.returncode == 1
    assert "RuntimeError: the probe failed" in err


def test_a_preloaded_module_runs_as_a_fresh_python_runs_it(server):
    """Spark's daemon, imported by the server before it forks: it announces its port and
    ends when its standard input closes, and says nothing else (runpy warns of a module
    run as ``__main__`` that was imported already)."""
    env = {**ENV, SERVER_VARIABLE: server.socket, "PYTHON_WORKER_FACTORY_SECRET": "x"}

    def run(*python: str) -> tuple[int, bytes, int]:
        daemon = subprocess.Popen(
            [*python, "-m", "pyspark.daemon"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        out, err = daemon.communicate(b"", timeout=30)
        return len(out), err, daemon.returncode

    forked = run(sys.executable, "-I", "-S", str(FORK_CLIENT))
    assert forked[:2] == (4, b"")  # the port, as a 4-byte int, and nothing on stderr
    assert forked == run(sys.executable)


def test_signals_to_the_client_reach_the_child(server):
    waiting = client(server, "wait")
    assert waiting.stdout is not None
    assert waiting.stdout.readline().startswith("waiting")
    waiting.send_signal(signal.SIGTERM)
    out, _ = waiting.communicate(timeout=30)
    assert (out, waiting.returncode) == ("terminated\n", 7)


def test_a_killed_client_takes_its_child_along(server):
    waiting = client(server, "wait")
    assert waiting.stdout is not None
    child = int(waiting.stdout.readline().split()[1])
    waiting.kill()
    waiting.wait(30)
    wait_until(lambda: not Path(f"/proc/{child}").exists(), 30, what=f"child {child} gone")


def test_the_childs_atexit_handlers_run(server):
    process = client(server, "atexit")
    out, _ = process.communicate(timeout=30)
    assert (out, process.returncode) == ("atexit ran\n", 0)


def test_a_different_interpreter_environment_starts_python_itself(server):
    assert report(server)["ppid"] == server.pid
    own = report(server, PYTHONHASHSEED="1")  # the server's children hash with seed 0
    assert own["ppid"] == os.getpid()  # the client exec'd the interpreter
    assert own["argv"][1:] == ["report", "one", "two"]


def test_without_a_server_the_client_starts_python_itself(tmp_path):
    gone = subprocess.Popen.__new__(subprocess.Popen)
    gone.socket = str(tmp_path / "no.sock")  # type: ignore[attr-defined]
    assert report(gone)["ppid"] == os.getpid()


def own_server(tmp_path: Path, *preloaded: str) -> subprocess.Popen:
    """A fork server on a socket in ``tmp_path`` that preloads the probe and ``preloaded``."""
    path = str(tmp_path / "fork.sock")
    process = subprocess.Popen(
        [sys.executable, "-m", "onceflow.spark.fork_server", path, PROBE, *preloaded],
        stdin=subprocess.PIPE,
        env=ENV,
        cwd=ROOT,
    )
    wait_until(lambda: os.path.exists(path), 30, what="the fork server's socket")
    process.socket = path  # type: ignore[attr-defined]
    return process


def test_a_client_whose_server_dies_ends(tmp_path):
    """Its child goes on (Spark's daemon ends with its JVM); the client, which Spark
    watches, must not wait for it: the child holds none of the server's descriptors."""
    server = own_server(tmp_path)
    waiting = client(server, "wait")
    assert waiting.stdout is not None
    child = int(waiting.stdout.readline().split()[1])
    server.kill()
    server.wait(30)
    try:
        assert waiting.wait(30) == 1
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_server_ends_with_its_parent(tmp_path):
    process = own_server(tmp_path)
    path = process.socket  # type: ignore[attr-defined]
    assert process.stdin is not None
    process.stdin.close()  # what the driver's end does, however the driver ends
    assert process.wait(30) == 0
    assert not os.path.exists(path)


def test_spark_python_workers_are_forked_by_the_sessions_server(spark):
    from pyspark.sql.functions import udf

    server = fork_server._started
    assert server is not None and server.poll() is None

    @udf("long")
    def daemon_parent(_: int) -> int:
        daemon = os.getppid()  # a task's worker is forked by Spark's daemon
        with open(f"/proc/{daemon}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])

    (row,) = spark.range(1).select(daemon_parent("id").alias("pid")).collect()
    assert row.pid == server.pid
