"""Everything a proof run is told: the pipeline, its input and outputs, the schedule."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

QUICK_RECORDS = 200
FULL_RECORDS = 600


@dataclass(slots=True)
class ProofOptions:
    mode: str  # "runner" | "command"
    handler: str | None = None  # runner: MODULE:HANDLER
    config: Path | None = None  # runner: runner.toml
    command: list[str] = field(default_factory=list)  # command: argv
    directory: Path = field(default_factory=Path.cwd)  # where the pipeline runs
    input_topic: str | None = None
    outputs: list[str] = field(default_factory=list)
    generator: str | None = None  # MODULE:FUNCTION(n, rng) -> (key, value): the input
    expect: str | None = None  # MODULE:FUNCTION(values) -> {"table:NAME": rows}
    id_field: str | None = None
    key_field: str | None = None
    dead_letter_topic: str | None = None
    database: bool = False  # command: give the pipeline a fresh SQLite database
    schema: Path | None = None
    topics_file: Path | None = None
    records: int | None = None
    keys: int = 8
    partitions: int = 3
    seed: int | None = None
    kills: str | None = None  # replay this schedule (STEP:N,...)
    kills_per_step: int | None = None  # runner: kills at each step (default 1, 2 full)
    command_kills: int | None = None  # command: kills per schedule (default 3, 6 full)
    quick: bool = False
    shrink: bool = True
    bootstrap: str | None = None  # a running cluster instead of the embedded broker
    kill_broker: bool = False
    stall_s: float = 60.0
    work_dir: Path | None = None

    @property
    def record_count(self) -> int:
        if self.records is not None:
            return self.records
        return QUICK_RECORDS if self.quick else FULL_RECORDS
