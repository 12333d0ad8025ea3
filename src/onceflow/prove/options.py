"""Everything a proof run is told: the pipeline, its input and outputs, the schedule."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

QUICK_RECORDS = 200
QUICK_COMMAND_RECORDS = 300
FULL_RECORDS = 600


@dataclass(slots=True)
class ProofOptions:
    mode: str  # "runner" | "command" | "spark"
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
    kills: str | None = None  # replay this schedule ([ACTION/]STEP:N[@W],...)
    kills_per_step: int | None = None  # runner: kills at each step (default 1, 2 full)
    command_kills: int | None = None  # faults per schedule (default 3, 6 full)
    faults: tuple[str, ...] = ("kill",)  # the fault kinds (onceflow.faults.schedule actions)
    workers: int = 1  # copies of the pipeline, each killed on its own
    database_url: str | None = None  # a PostgreSQL server: a fresh database per trial
    quick: bool = False
    shrink: bool = True
    bootstrap: str | None = None  # a running cluster instead of the embedded broker
    kafka_cluster: bool = False  # start a 3-node Apache Kafka (its node faults need it)
    # a running KafkaCluster to use (tests; leader faults need replication_proxies=True)
    cluster: KafkaCluster | Any = None
    stall_s: float = 60.0
    work_dir: Path | None = None

    @property
    def record_count(self) -> int:
        if self.records is not None:
            return self.records
        if self.quick:  # a command's faults each take their input window; a Runner's not
            return QUICK_RECORDS if self.mode == "runner" else QUICK_COMMAND_RECORDS
        return FULL_RECORDS
