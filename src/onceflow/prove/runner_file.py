"""``runner.toml``: the Runner's settings (``[runner]``, RunnerConfig's field names) and
what the proof needs to know (``[prove]``)::

    [runner]
    group_id = "orders"
    topics = ["orders"]
    pattern = "db_offsets"
    database_url = "sqlite:///orders.db"      # a fresh orders.db in each trial's directory
                                              # (postgresql://...: a fresh database each)

    [prove]
    outputs = ["table:orders"]                # or topic:NAME; what the pipeline writes
    schema = "schema.sql"                     # run on each trial's fresh database
    id_field = "id"                           # where an output carries the input's id
    key_field = "key"
    output_database = "app.db"                # tables to audit live in another file
                                              # (default: the Runner's database)
    generator = "orders:order"                # the input: FUNCTION(n, rng) -> (key, value)
    expect = "orders:totals"                  # tables of state: FUNCTION(values) -> rows
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceflow.configuration_error import ConfigurationError
from onceflow.patterns.guarantees import Plan
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.prove.errors import ProveError

PROVE_KEYS = frozenset({"input", "outputs", "schema", "topics_file", "id_field", "key_field",
                        "output_database", "generator", "expect"})  # fmt: skip
# What prove sets for every trial: small batches (more places to die) and an exit once
# idle; the Runner subscribes or assigns as its settings say.
BATCH_SIZE_LIMIT = 25
IDLE_EXIT_S = 1.0


@dataclass(slots=True)
class RunnerFile:
    path: Path
    runner: dict[str, Any]
    prove: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> RunnerFile:
        try:
            document = tomllib.loads(path.read_text())
        except OSError as error:
            raise ProveError(f"cannot read {path}: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ProveError(f"{path}: {error}") from None
        runner = document.get("runner")
        if not isinstance(runner, dict):
            raise ProveError(f"{path}: no [runner] section (RunnerConfig's settings)")
        prove = document.get("prove", {})
        unknown = set(prove) - PROVE_KEYS
        if unknown:
            raise ProveError(f"{path}: unknown [prove] setting {sorted(unknown)[0]!r}; known: "
                             f"{', '.join(sorted(PROVE_KEYS))}")  # fmt: skip
        return cls(path, runner, prove)

    def relative(self, name: str | None) -> Path | None:
        return None if name is None else (self.path.parent / name).resolve()

    def config(self, bootstrap: str, database_url: str | None = None) -> RunnerConfig:
        """The RunnerConfig of one trial, on the trial's own database (``database_url``)."""
        settings = dict(self.runner)
        settings.setdefault("group_id", "onceflow-prove")
        if database_url is not None and self.uses_database:
            settings["database_url"] = database_url
        settings.update(
            bootstrap_servers=bootstrap,
            idle_exit_s=IDLE_EXIT_S,
            batch_size=min(int(settings.get("batch_size", BATCH_SIZE_LIMIT)), BATCH_SIZE_LIMIT),
            poll_timeout_s=0.2,
            progress_log_s=None,
            max_poll_interval_ms=min(int(settings.get("max_poll_interval_ms", 60_000)), 60_000),
            retry_backoff_s=0.2,
            consumer_config={"fetch.wait.max.ms": 50, **settings.get("consumer_config", {})},
        )
        try:
            return RunnerConfig(**settings)
        except TypeError as error:
            raise ProveError(f"{self.path}: [runner] {error}".replace("__init__() ", "")) from None

    def plan(self) -> tuple[RunnerConfig, Plan]:
        config = self.config("127.0.0.1:9092", None)
        try:
            return config, config.validate()
        except ConfigurationError as error:
            raise ProveError(f"{self.path}: {error}") from None

    @property
    def uses_database(self) -> bool:
        return self.runner.get("database_url") is not None

    @property
    def database_url(self) -> str | None:
        url = self.runner.get("database_url")
        return None if url is None else str(url)

    @property
    def database_name(self) -> str | None:
        """The file name of the Runner's SQLite database (None without one; ``app.db`` for
        a PostgreSQL URL, whose trials each get a database of their own)."""
        url = self.database_url
        if url is None:
            return None
        return Path(url.removeprefix("sqlite:///")).name if url.startswith("sqlite:") else "app.db"

    @property
    def output_database_name(self) -> str | None:
        return self.prove.get("output_database") or self.database_name

    @property
    def postgres_server(self) -> str | None:
        """The PostgreSQL server the Runner's database_url names (None for SQLite)."""
        url = self.database_url
        return url if url is not None and not url.startswith("sqlite:") else None
