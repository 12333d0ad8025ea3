"""The Apache Kafka launcher's failures are one line, and no JVM outlives its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from onceflow.kafka_cluster import KAFKA_VERSION, cache_dir

ONCEFLOW = [sys.executable, "-m", "onceflow"]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [*ONCEFLOW, "kafka-cluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 1, result
    progress = "starting Apache Kafka"
    lines = [line for line in result.stderr.splitlines() if not line.startswith(progress)]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for text in expected:
        assert text in lines[0], lines[0]


def test_a_taken_port_is_named_in_one_line():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_cli("--nodes", "1", "--port", str(port))
    assert_one_line_error(result, f"node 1 cannot listen on 127.0.0.1:{port}", "in use")


def test_missing_java_is_named_in_one_line():
    result = run_cli(env={"ONCEFLOW_JAVA": "/nonexistent/bin/java"})
    assert_one_line_error(result, "Java not found (/nonexistent/bin/java)", "Java 17")


def test_missing_maven_is_named_in_one_line(tmp_path):
    env = {"ONCEFLOW_KAFKA_CACHE": str(tmp_path / "cache"), "ONCEFLOW_MVN": "/nonexistent/mvn"}
    assert_one_line_error(run_cli("--fetch", env=env), "Maven (/nonexistent/mvn) not found")


def test_unreachable_maven_is_named_in_one_line(tmp_path):
    """Real Maven, offline, with an empty local repository: nothing can be resolved."""
    offline = tmp_path / "mvn"
    offline.write_text(f'#!/bin/sh\nexec mvn -o -Dmaven.repo.local={tmp_path}/repo "$@"\n')
    offline.chmod(0o755)
    env = {"ONCEFLOW_KAFKA_CACHE": str(tmp_path / "cache"), "ONCEFLOW_MVN": str(offline)}
    assert_one_line_error(
        run_cli("--fetch", env=env), f"could not fetch Apache Kafka {KAFKA_VERSION}'s jars"
    )
    assert not (tmp_path / "cache" / "libs").exists()


def test_cached_jars_need_no_maven():
    """The stamp marks a complete copy: a second fetch runs no Maven at all."""
    assert run_cli("--fetch").returncode == 0
    result = run_cli("--fetch", env={"ONCEFLOW_MVN": "/nonexistent/mvn"})
    assert result.returncode == 0, result.stderr
    assert str(cache_dir() / "libs") in result.stdout


# --------------------------------------------------------------------------- no orphans

PARENT = textwrap.dedent(
    """
    import sys, time
    from onceflow.kafka_cluster import KafkaCluster
    cluster = KafkaCluster(1).start()
    print(" ".join(str(n.pid) for n in cluster.nodes.values()), cluster.directory, flush=True)
    sys.stdin.readline()  # the test has seen the JVMs alive
    if sys.argv[1] == "sleep":
        time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def start_parent(mode: str) -> tuple[subprocess.Popen, list[int], Path]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdin is not None and parent.stdout is not None
    *pids, directory = parent.stdout.readline().split()
    jvms = [int(pid) for pid in pids]
    assert jvms and all(alive(pid) for pid in jvms)
    parent.stdin.write("go\n")
    parent.stdin.flush()
    return parent, jvms, Path(directory)


def test_sigkill_of_the_python_parent_leaves_no_jvm():
    parent, jvms, _ = start_parent("sleep")
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert wait_gone(jvms) == []
    finally:
        for pid in jvms:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_parent_that_exits_without_stopping_leaves_no_jvm_and_no_directory():
    parent, jvms, directory = start_parent("exit")
    assert parent.wait(60) == 0
    assert wait_gone(jvms) == []
    assert not directory.exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_command_and_every_node(sig):
    command = subprocess.Popen(
        [*ONCEFLOW, "kafka-cluster", "--nodes", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert command.stdout is not None
    line = command.stdout.readline()
    assert line.startswith("bootstrap 127.0.0.1:"), command.stderr
    jvms = [
        int(pid)
        for pid in subprocess.run(
            ["pgrep", "-P", str(command.pid)], capture_output=True, text=True
        ).stdout.split()
    ]
    assert jvms
    command.send_signal(sig)
    assert command.wait(30) == 0
    assert wait_gone(jvms) == []
