"""A throwaway PostgreSQL server for tests (one per pytest worker process).

``postgres_server`` (session scope) runs ``initdb`` into a temporary directory and starts
``postgres`` on a free loopback port; ``postgres_url`` gives each test a fresh database.
As root, the server runs as the ``postgres`` user the Debian package creates (PostgreSQL
refuses to run as root). Tests are skipped, with a message saying why, only when the
PostgreSQL binaries are absent (``make test`` installs them: scripts/system-deps.sh).

Use it from a test module with ``from tests.postgres import postgres_server, postgres_url``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from onceflow.ports import free_port

USER = "onceflow"


def find_bin_dir() -> Path | None:
    override = os.environ.get("ONCEFLOW_PG_BIN")
    candidates = [override] if override else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="onceflow-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root needs the 'postgres' user") from None
            self.run_as = "postgres"
            shutil.chown(self.root, "postgres")
        os.chmod(self.root, 0o700)

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        full = list(command)
        if self.run_as:
            full = ["runuser", "-u", self.run_as, "--", *full]
        return subprocess.run(full, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", USER, "-A", "trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c max_connections=200 -c shared_buffers=64MB"
        )
        result = self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
            "-o", options, "-w", "-t", "60", "start", check=False,
        )  # fmt: skip
        if result.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log}")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
            "stop", check=False,
        )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL server binaries not found (initdb); run scripts/system-deps.sh"
            " or set ONCEFLOW_PG_BIN"
        )
    pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg 3")
    server = PostgresServer(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database()
