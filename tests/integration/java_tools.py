"""Java programs (Kafka's own tools, our small test apps) as subprocesses of a test.

Kafka's system-test tools print one JSON object per line on stdout; ``JavaProcess``
collects those lines on a thread so a test can wait for a condition on them (progress,
records consumed, a shutdown line) while the process runs. Every JVM runs with a small
heap, in its own session, and dies with the test process even when that is SIGKILLed
(``onceflow.kafka_cluster.spawn``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onceflow.children import forget, popen
from tests.kit.jvm import SHORT_LIVED_JVM_OPTIONS

JAVA_SOURCES = Path(__file__).resolve().parents[1] / "java"
JVM_OPTIONS = ["-Xmx192m", *SHORT_LIVED_JVM_OPTIONS.split(), "-Xss512k"]


def kafka_classpath() -> str:
    """The pinned Apache Kafka release's classpath (clients, tools, streams)."""
    from onceflow.kafka_cluster import KafkaClusterError
    from onceflow.kafka_cluster.jars import classpath

    try:
        return classpath()
    except KafkaClusterError as error:
        pytest.fail(f"Apache Kafka's jars: {error}", pytrace=False)


def compile_java(output_dir: Path, *sources: str) -> str:
    """Compiles ``tests/java/<source>`` into ``output_dir``; returns the full classpath."""
    classpath = kafka_classpath()
    output_dir.mkdir(parents=True, exist_ok=True)
    command = ["javac", "-nowarn", "-cp", classpath, "-d", str(output_dir)]
    command += [str(JAVA_SOURCES / source) for source in sources]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"javac failed: {result.stderr.strip()}", pytrace=False)
    return f"{output_dir}{os.pathsep}{classpath}"


class JavaProcess:
    """A JVM running ``main_class``; stdout's JSON lines land in ``events``."""

    def __init__(self, classpath: str, main_class: str, args: list[str], log_path: Path):
        self.name = main_class.rsplit(".", 1)[-1]
        self.log_path = log_path
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        with open(log_path, "a") as log:
            self.process = popen(
                ["java", *JVM_OPTIONS, "-cp", classpath, main_class, *args],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with open(self.log_path.with_suffix(".out"), "a") as copy:
            for line in self.process.stdout:
                copy.write(line)
                copy.flush()
                self._parse(line.strip())
        with self._changed:
            self._changed.notify_all()

    def _parse(self, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(
        self, condition: Callable[[list[dict[str, Any]]], bool], timeout: float, what: str
    ) -> None:
        """Blocks until ``condition(events)`` holds; fails the test on timeout or exit."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self.events):
                if self.process.poll() is not None and not self._reader.is_alive():
                    pytest.fail(
                        f"{self.name} exited ({self.process.returncode}) before {what}; "
                        f"see {self.log_path}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"{self.name}: no {what} in {timeout:.0f}s; see {self.log_path}")
                self._changed.wait(min(left, 0.5))

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the JVM: no shutdown hook, no close, like a crash."""
        self._signal(signal.SIGKILL)
        self.process.wait()
        self._reader.join(5)
        forget(self.process)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the JVM's shutdown hooks run) and wait; SIGKILL after ``timeout``."""
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(5)
        forget(self.process)
        return self.process.returncode

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {timeout:.0f}s; see {self.log_path}")
        self._reader.join(5)
        forget(self.process)
        return code

    def _signal(self, number: int) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(number)


class JavaProcesses:
    """Every JVM a test started; ``close`` kills those still running."""

    def __init__(self, classpath: str, log_dir: Path):
        self.classpath = classpath
        self.log_dir = log_dir
        self.started: list[JavaProcess] = []

    def start(self, main_class: str, args: list[str], log_name: str) -> JavaProcess:
        process = JavaProcess(self.classpath, main_class, args, self.log_dir / f"{log_name}.log")
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            process.kill()


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path
