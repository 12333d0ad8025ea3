"""One Apache Kafka node (broker and KRaft controller in one JVM) in a directory of its own.

``<directory>/server.properties`` is its configuration, ``<directory>/data`` its log
directory (formatted once by ``kafka.tools.StorageTool``), ``server.log`` what log4j
writes and ``jvm.out`` the JVM's own output. The node keeps its ports, data and node id
across kills and restarts.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from onceflow import children
from onceflow.kafka_cluster.errors import KafkaClusterError
from onceflow.kafka_cluster.jars import KAFKA_VERSION, LOG4J_CONFIG

STARTED_LINE = "Kafka Server started"
DEFAULT_HEAP = "320m"
# Quick to start and small: C1 only, one serial GC thread, a fixed small heap.
FAST_START_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:ReservedCodeCacheSize=64m",
    "-Xss512k",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


def find_java(java: str | None = None) -> str:
    """``java``, else ``$ONCEFLOW_JAVA``, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    candidate = java or os.environ.get("ONCEFLOW_JAVA")
    if not candidate and os.environ.get("JAVA_HOME"):
        candidate = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    candidate = candidate or "java"
    resolved = shutil.which(candidate)
    if resolved is None:
        raise KafkaClusterError(
            f"Java not found ({candidate}): Apache Kafka {KAFKA_VERSION} needs Java 17 or "
            "newer; install it (Debian package openjdk-17-jre-headless, or "
            "scripts/system-deps.sh) or point ONCEFLOW_JAVA at it"
        )
    return resolved


class KafkaNode:
    """A combined broker+controller JVM; ``start``/``kill``/``terminate`` any number of times."""

    def __init__(
        self,
        node_id: int,
        directory: Path,
        broker_port: int,
        controller_port: int,
        properties: Mapping[str, str],
        java: str,
        classpath: str,
        heap: str = DEFAULT_HEAP,
        jvm_options: Sequence[str] = FAST_START_OPTIONS,
        listener_ports: Mapping[str, int] | None = None,
        format_args: Sequence[str] = (),
        niceness: int = 0,
    ) -> None:
        """``listener_ports``: other client listeners than PLAINTEXT (name -> port);
        ``format_args``: more arguments of ``kafka-storage format`` (SCRAM users)."""
        self.node_id = node_id
        self.listener_ports = dict(listener_ports or {})
        self.format_args = list(format_args)
        self.niceness = niceness
        self.directory = Path(directory)
        self.broker_port = broker_port
        self.controller_port = controller_port
        self.properties = dict(properties)
        self.java = java
        self.classpath = classpath
        self.heap = heap
        self.jvm_options = list(jvm_options)
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0  # where this launch's lines start in server.log and jvm.out
        self._output_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of one of the node's client listeners (PLAINTEXT's is bootstrap)."""
        if listener == "PLAINTEXT":
            return self.bootstrap
        return f"127.0.0.1:{self.listener_ports[listener]}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def jvm_output_path(self) -> Path:
        return self.directory / "jvm.out"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.running and self.process else None

    def rss_bytes(self) -> int | None:
        """Resident memory of the JVM, from /proc (None when it is not running)."""
        pid = self.pid
        if pid is None:
            return None
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        return int(match.group(1)) * 1024 if match else None

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.properties.items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    @property
    def formatted(self) -> bool:
        return (Path(self.properties["log.dirs"]) / "meta.properties").exists()

    def log_bytes(self, topic: str, partition: int) -> int:
        """How many bytes of records this node's replica of the partition holds on disk (its
        segments' sizes: Kafka does not preallocate them); 0 where it has none."""
        total = 0
        for segment in (Path(self.properties["log.dirs"]) / f"{topic}-{partition}").glob("*.log"):
            with contextlib.suppress(FileNotFoundError):  # deleted since listed (a reset)
                total += segment.stat().st_size
        return total

    def start_format(self, cluster_id: str) -> subprocess.Popen[bytes]:
        """``kafka-storage format`` for a static quorum (``controller.quorum.voters``)."""
        output = open(self.directory / "format.out", "wb")  # noqa: SIM115  (the child's)
        with output:
            return children.popen(
                [
                    *self._java_command("kafka.tools.StorageTool"),
                    "format",
                    "--cluster-id",
                    cluster_id,
                    "--config",
                    str(self.config_path),
                    *self.format_args,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def check_format(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise KafkaClusterError(
                f"node {self.node_id}: formatting its storage took over {timeout:.0f}s"
            ) from None
        finally:
            children.forget(process)
        if code != 0:
            output = (self.directory / "format.out").read_text(errors="replace")
            raise KafkaClusterError(
                f"node {self.node_id}: formatting its storage failed: "
                f"{failure_cause(output, self.java)}"
            )

    def launch(self) -> None:
        """Start the JVM without waiting (``wait_started`` waits)."""
        if self.running:
            return
        self._log_offset = _size(self.log_path)
        self._output_offset = _size(self.jvm_output_path)
        output = open(self.jvm_output_path, "ab")  # noqa: SIM115  (the child's)
        with output:
            # nice(1) runs the JVM at the default priority, with a warning, where it may
            # not raise it.
            nice = ["nice", "-n", str(self.niceness)] if self.niceness else []
            self.process = children.popen(
                [*nice, *self._java_command("kafka.Kafka"), str(self.config_path)],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def wait_started(self, deadline: float) -> None:
        """Until log4j says the server started; a one-line error if the JVM exits first."""
        while time.monotonic() < deadline:
            if STARTED_LINE in self._new_log():
                return
            if not self.running:
                raise KafkaClusterError(f"node {self.node_id} did not start: {self.cause()}")
            time.sleep(0.1)
        self.kill()
        raise KafkaClusterError(
            f"node {self.node_id} did not start within the time allowed (log: {self.log_path})"
        )

    def cause(self) -> str:
        """Why the JVM exited, in one line, from its output and log."""
        jvm_output = _read(self.jvm_output_path, self._output_offset)
        return failure_cause(jvm_output + "\n" + self._new_log(), self.java, self.log_path)

    def kill(self) -> None:
        """SIGKILL, like a power cut of this node; waits until the process is gone."""
        self._signal(signal.SIGKILL, timeout=None)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown); SIGKILL after ``timeout`` seconds."""
        return self._signal(signal.SIGTERM, timeout)

    def _signal(self, sig: signal.Signals, timeout: float | None) -> int | None:
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        children.forget(process)
        return process.returncode

    def _java_command(self, main_class: str) -> list[str]:
        return [
            self.java,
            "-Xms64m",
            f"-Xmx{self.heap}",
            *self.jvm_options,
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dkafka.logs.dir={self.directory}",
            "-cp",
            self.classpath,
            main_class,
        ]

    def _new_log(self) -> str:
        """What log4j wrote since the last launch."""
        return _read(self.log_path, self._log_offset)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, offset: int = 0) -> str:
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read().decode(errors="replace")
    except OSError:
        return ""


_BIND = re.compile(r"failed to bind to ([\w.\-\[\]:]+?):? Address already in use", re.I)
_EXCEPTION = re.compile(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$")


def failure_cause(output: str, java: str, log: Path | None = None) -> str:
    """The cause of a failed start in one line: a port in use, a Java too old, missing jars,
    else the first exception message or error line."""
    bind = _BIND.search(output)
    if bind:
        return f"{bind.group(1)} is already in use"
    if "Address already in use" in output:
        return "a port it needs is already in use"
    if "UnsupportedClassVersionError" in output:
        return f"{java} is too old: Apache Kafka {KAFKA_VERSION} needs Java 17 or newer"
    if "Could not find or load main class" in output:
        return "Apache Kafka's jars are missing (delete the jar cache and fetch them again)"
    if "Error occurred during initialization of VM" in output or "Invalid maximum heap" in output:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        return f"the JVM refused its options: {lines[0]}"
    for line in output.splitlines():
        match = _EXCEPTION.match(line.strip())
        if match:
            return match.group(1).strip()
    for line in output.splitlines():
        if " ERROR " in line or line.startswith("ERROR"):
            return line.split(" ERROR ", 1)[-1].strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    where = f" (log: {log})" if log else ""
    return (lines[-1] if lines else "it exited without a message") + where
