"""``onceflow prove`` on PostgreSQL: every trial gets a fresh database on the server the
suite starts (``--database-url``, or a runner.toml whose database_url is PostgreSQL), in
runner and command modes; the broken pipelines are found and the correct ones hold."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import psycopg
import pytest

from onceflow.db import DatabaseUrl
from onceflow.testing import prove
from tests.integration.console_script import onceflow
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prove"


def runner_on_postgres(example: str, url: str, tmp_path: Path) -> Path:
    """A copy of a Runner example whose runner.toml names the PostgreSQL database."""
    directory = tmp_path / example
    shutil.copytree(EXAMPLES / example, directory)
    config = directory / "runner.toml"
    lines = [f'database_url = "{url}"' if line.startswith("database_url") else line
             for line in config.read_text().splitlines()]  # fmt: skip
    config.write_text("\n".join(lines) + "\n")
    return directory


def trial_databases(url: str) -> list[str]:
    with psycopg.connect(DatabaseUrl.parse(url).target) as db:
        rows = db.execute("SELECT datname FROM pg_database WHERE datname LIKE 'prove_%'")
        return [name for (name,) in rows]


@pytest.mark.parametrize(("example", "kills", "held"), [
    ("db_offsets", "after_db_commit:1,after_seek:1", True),
    ("at_least_once", "after_db_commit:1", False),
])  # fmt: skip
def test_a_runner_on_postgresql(example, kills, held, postgres_url, tmp_path):  # noqa: F811
    directory = runner_on_postgres(example, postgres_url, tmp_path)
    proof = prove("runner", handler=f"{example}_pipeline:handle",
                  config=directory / "runner.toml", directory=directory, records=120,
                  kills=kills, work_dir=tmp_path / "work")  # fmt: skip
    assert proof.held is held, proof.verdict()
    assert proof.complete
    if not held:
        assert proof.failure is not None and proof.failure.trial.report.counts["duplicated"]
    assert trial_databases(postgres_url) == []  # each trial's database is dropped after


@pytest.mark.parametrize(("fixed", "code"), [(False, 1), (True, 0)], ids=["broken", "fixed"])
def test_a_plain_consumer_on_postgresql(fixed, code, postgres_url, tmp_path):  # noqa: F811
    result = onceflow(
        "prove", "command", "--input", "orders", "--output", "table:orders",
        "--schema", "schema.sql", "--database-url", postgres_url, "--quick", "--seed", "11",
        "--work-dir", str(tmp_path), "--", sys.executable, "postgres_consumer.py",
        *(["--fixed"] if fixed else []), cwd=EXAMPLES / "command", timeout=300,
    )  # fmt: skip
    assert result.returncode == code, result.stdout + result.stderr
