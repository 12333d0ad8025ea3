"""An ``onceflow broker`` subprocess: start, SIGKILL, restart on the same data and port.

Used by the pytest plugin (``onceflow.testing``), the demos, the chaos harness and the
benchmarks; it needs nothing but the standard library.

A port 0 (the default, or in ``listeners``) becomes a free port below the kernel's
ephemeral range (``onceflow.ports``), kept across restarts. A port the kernel hands out
would, once the broker is gone, go to the next socket that binds port 0 (a Spark worker's
callback socket, say), and a client still retrying the dead broker would connect to it.

The broker never outlives the process that started it (``onceflow.children``: its own
session, PR_SET_PDEATHSIG on Linux), so a test run that is itself killed leaves no broker
behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onceflow import children
from onceflow.ports import free_port, free_ports


class BrokerProcess:
    """An ``onceflow broker`` subprocess."""

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        config: dict[str, str] | None = None,
        log_path: Path | None = None,
        advertised_host: str | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.config = dict(config or {})
        self.advertised_host = advertised_host
        self.env = dict(env or {})  # extra environment (e.g. the test-only fsync hooks)
        self.args = list(args or ())  # extra `onceflow broker` options (e.g. --add-scram)
        self.log_path = log_path or self.data_dir.parent / f"{self.data_dir.name}.log"
        self.process: subprocess.Popen[str] | None = None
        # Listener name -> "host:port" from the ready line (PLAINTEXT alone by default).
        self.listeners: dict[str, str] = {}

    @property
    def pid(self) -> int:
        assert self.process is not None, "the broker was not started"
        return self.process.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of a listener named in the ``listeners`` setting."""
        return self.listeners[listener.upper()]

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        command = [
            sys.executable,
            "-m",
            "onceflow",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--log-level",
            "INFO",
            *self.args,
        ]
        config, self.port, self.listeners = bind_ports(self.config, self.port, self.listeners)
        if "listeners" not in config:
            command += ["--port", str(self.port)]
        if self.advertised_host:
            command += ["--advertised-host", self.advertised_host]
        for key, value in config.items():
            command += ["--config", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "a")  # noqa: SIM115  (kept open for the child)
        self.process = children.popen(
            command,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        log_file.close()
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("ready "):
                self.listeners = parse_ready_line(line)
                self.port = int(next(iter(self.listeners.values())).rsplit(":", 1)[1])
                return self
            if not line and self.process.poll() is not None:
                break
        self.kill()
        raise RuntimeError(f"broker did not start; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no flush, no snapshot, exactly like a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.process is not None:
            children.forget(self.process)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for a clean shutdown; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        children.forget(self.process)
        return self.process.returncode

    def restart(self, kill: bool = True) -> BrokerProcess:
        """Kill (or stop) and start again on the same port and data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_ready_line(line: str) -> dict[str, str]:
    """Listener name -> ``host:port`` from ``ready HOST:PORT`` (the default PLAINTEXT
    listener) or ``ready NAME://HOST:PORT,NAME://HOST:PORT`` (with ``listeners`` set)."""
    listeners = {}
    for entry in line.removeprefix("ready ").strip().split(","):
        name, separator, address = entry.partition("://")
        if separator:
            listeners[name] = address
        else:
            listeners["PLAINTEXT"] = entry
    return listeners


def listener_entries(listeners: str) -> list[tuple[str, str, str]]:
    """``(name, host, port)`` of each entry of a ``listeners`` setting."""
    entries = []
    for entry in listeners.split(","):
        name, _, address = entry.strip().partition("://")
        host, _, port = address.rpartition(":")
        entries.append((name, host, port))
    return entries


def with_ports(listeners: str, bound: dict[str, str]) -> str:
    """The ``listeners`` setting with each port 0 replaced by the port it got."""
    entries = []
    for name, host, port in listener_entries(listeners):
        if port == "0" and name.upper() in bound:
            port = bound[name.upper()].rsplit(":", 1)[1]
        entries.append(f"{name}://{host}:{port}")
    return ",".join(entries)


def bind_ports(
    config: dict[str, str], port: int, listeners: dict[str, str]
) -> tuple[dict[str, str], int, dict[str, str]]:
    """The settings, port and listeners to start with: each port 0 a free port below the
    ephemeral range; on a restart (``listeners`` known), the ports of the first start."""
    config = dict(config)
    if "listeners" not in config:
        return config, port or free_port(), listeners
    listeners = listeners or chosen_ports(config["listeners"])
    config["listeners"] = with_ports(config["listeners"], listeners)
    return config, port, listeners


def chosen_ports(listeners: str) -> dict[str, str]:
    """Listener name -> ``host:port`` for each listener on port 0, with a free port."""
    zeros = [(name, host) for name, host, port in listener_entries(listeners) if port == "0"]
    ports = free_ports(len(zeros)) if zeros else []
    return {name.upper(): f"{host}:{port}" for (name, host), port in zip(zeros, ports, strict=True)}


def temporary_broker(config: dict[str, str] | None = None) -> BrokerProcess:
    """A broker in a fresh temporary directory (caller stops it)."""
    return BrokerProcess(Path(tempfile.mkdtemp(prefix="onceflow-")) / "data", config=config).start()
