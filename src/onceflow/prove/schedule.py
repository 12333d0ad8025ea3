"""Kill schedules: which kill ends each life of the pipeline, drawn from a seed.

A schedule is a list of kills, one per life (process start) of the pipeline; after the
last kill the pipeline runs until its input is drained. A kill is written ``STEP:N``:

* Runner mode: SIGKILL the N-th time the process reaches crash point STEP
  (``after_db_commit:2``), through ``ONCEFLOW_CRASH_AT``;
* command mode: ``progress:N``, SIGKILL the process group once the outputs have grown by
  N records since this life started (so that the kill lands while it makes progress).

The same seed gives the same schedules (``random.Random(seed)``); ``--kills`` replays one
schedule as written.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.prove.errors import ProveError
from onceflow.prove.steps import ONCE_PER_START

PROGRESS = "progress"
MAX_OCCURRENCE = 3  # a Runner kill lands in one of the first three batches of a life


@dataclass(frozen=True, slots=True)
class Kill:
    step: str
    occurrence: int

    def __str__(self) -> str:
        return f"{self.step}:{self.occurrence}"


Schedule = tuple[Kill, ...]


def format_schedule(schedule: Sequence[Kill]) -> str:
    return ",".join(str(kill) for kill in schedule)


def parse_schedule(text: str, known_steps: Sequence[str] | None = None) -> Schedule:
    kills = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        step, _, count = item.partition(":")
        try:
            occurrence = int(count) if count else 1
        except ValueError:
            raise ProveError(f"bad kill {item!r}: expected STEP:N") from None
        if occurrence < 1:
            raise ProveError(f"bad kill {item!r}: N counts from 1")
        if known_steps is not None and step not in known_steps:
            raise ProveError(f"unknown step {step!r} in --kills; known: {', '.join(known_steps)}")
        kills.append(Kill(step, occurrence))
    if not kills:
        raise ProveError("--kills names no kill")
    return tuple(kills)


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 1_000_000)


def runner_sweep(steps: Sequence[str], seed: int, kills_per_step: int) -> list[Schedule]:
    """One schedule per step: ``kills_per_step`` kills at that step, in random batches."""
    rng = random.Random(f"sweep-{seed}")
    schedules = []
    for step in steps:
        top = 1 if step in ONCE_PER_START else MAX_OCCURRENCE
        schedules.append(tuple(Kill(step, rng.randint(1, top)) for _ in range(kills_per_step)))
    return schedules


def runner_mixed(steps: Sequence[str], seed: int, kills: int) -> Schedule:
    """Kills at random steps and batches, for faults that need two different kills."""
    rng = random.Random(f"mixed-{seed}")
    schedule = []
    for _ in range(kills):
        step = rng.choice(list(steps))
        top = 1 if step in ONCE_PER_START else MAX_OCCURRENCE
        schedule.append(Kill(step, rng.randint(1, top)))
    return tuple(schedule)


def progress_schedule(seed: int, kills: int, records: int) -> Schedule:
    """Kills after the outputs grew by a random number of records, spread so that the
    lives together consume about half the input (the rest drains after the last kill)."""
    rng = random.Random(f"progress-{seed}")
    top = max(2, records // (2 * kills))
    return tuple(Kill(PROGRESS, rng.randint(1, top)) for _ in range(kills))
