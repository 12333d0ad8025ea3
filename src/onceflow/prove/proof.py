"""A whole proof: the seeded schedules, one trial each, the verdict, and on a failure the
smallest failing schedule (shrunk) with the command that replays it."""

from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.prove.errors import ProveError
from onceflow.prove.explain import Cause, explain
from onceflow.prove.lives import LifeResult
from onceflow.prove.options import ProofOptions
from onceflow.prove.schedule import (
    Schedule,
    format_schedule,
    new_seed,
    parse_schedule,
    progress_schedule,
    runner_mixed,
    runner_sweep,
)
from onceflow.prove.shrink import shrink
from onceflow.prove.target import Target, build_target
from onceflow.prove.trial import TrialResult, Trials


@dataclass(slots=True)
class Failure:
    trial: TrialResult  # the smallest failing schedule's trial
    replay: str  # the command that replays it

    @property
    def schedule(self) -> Schedule:
        return self.trial.schedule


@dataclass(slots=True)
class Proof:
    mode: str
    pipeline: str
    seed: int
    steps: list[str]
    trials: list[TrialResult]
    failure: Failure | None
    causes: list[Cause]
    seconds: float
    replay: str  # the command that replays the whole proof
    work_dir: Path | None = None
    shrink_trials: list[TrialResult] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return self.failure is None

    @property
    def kills(self) -> int:
        return sum(len(t.landed) for t in self.trials)

    @property
    def mid_processing(self) -> int:
        return sum(t.mid_processing for t in self.trials)

    @property
    def distinct_steps(self) -> int:
        return len({k.step for t in self.trials for k in t.landed})

    @property
    def kills_planned(self) -> int:
        return sum(len(t.schedule) for t in self.trials)

    @property
    def anomalies(self) -> int:
        return sum(len(t.report.anomalies) for t in self.trials)

    def verdict(self) -> str:
        if self.held:
            if self.mode == "runner":
                where = f"at {self.distinct_steps} distinct steps"
            else:
                where = f"({self.mid_processing} mid-processing)"
            return f"exactly-once held: {self.kills} kills {where}, 0 anomalies"
        assert self.failure is not None
        trial = self.failure.trial
        counts = ", ".join(f"{n} {kind}" for kind, n in trial.report.counts.items() if n)
        kills = len(self.failure.schedule)
        return (f"exactly-once BROKEN: {counts} after {kills} kill{'s' * (kills != 1)} "
                f"({format_schedule(self.failure.schedule)})")  # fmt: skip


def _schedules(target: Target, options: ProofOptions, seed: int) -> list[Schedule]:
    if options.kills:
        known = target.steps if target.mode == "runner" else None
        return [parse_schedule(options.kills, known)]
    if target.mode == "runner":
        per_step = options.kills_per_step or (1 if options.quick else 2)
        schedules = runner_sweep(target.steps, seed, per_step)
        if not options.quick:
            schedules.append(runner_mixed(target.steps, seed, len(target.steps)))
        return schedules
    kills = options.command_kills or (3 if options.quick else 6)
    rounds = 1 if options.quick else 2
    return [progress_schedule(seed + r, kills, options.record_count) for r in range(rounds)]


def _replay(target: Target, options: ProofOptions, seed: int, kills: str | None) -> str:
    words = list(target.replay_prefix)
    for flag, value, default in (
        ("--records", options.records, None),
        ("--keys", options.keys, 8),
        ("--partitions", options.partitions, 3),
        ("--schema", options.schema, None),
        ("--topics-file", options.topics_file, None),
        ("--dlq", options.dead_letter_topic, None),
        ("--id-field", options.id_field, None),
        ("--key-field", options.key_field, None),
    ):
        if value is not None and value != default:
            words += [flag, str(value)]
    if options.database:
        words.append("--database")
    if options.quick:
        words.append("--quick")
    words += ["--seed", str(seed)]
    if kills:
        words += ["--kills", kills]
    return shlex.join(words + target.replay_suffix)


def run_proof(
    options: ProofOptions,
    on_life: Callable[[int, LifeResult], None] | None = None,
    on_trial: Callable[[TrialResult], None] | None = None,
) -> Proof:
    """Run the proof; a ProveError for bad input. Nothing is left running either way."""
    started = time.monotonic()
    target = build_target(options)
    seed = options.seed if options.seed is not None else new_seed()
    keep = options.work_dir is not None
    work = options.work_dir or Path(tempfile.mkdtemp(prefix="onceflow-prove-"))
    trials = Trials(target, options, work, on_life)
    results: list[TrialResult] = []
    shrink_results: list[TrialResult] = []
    failure = None
    completed = False
    try:
        for schedule in _schedules(target, options, seed):
            result = trials.run(schedule)
            results.append(result)
            if on_trial is not None:
                on_trial(result)
        failing = [r for r in results if not r.ok]
        if failing:
            smallest = min(failing, key=lambda r: (len(r.landed) or len(r.schedule), r.number))
            best = smallest
            if options.shrink and len(smallest.schedule) > 1 and not options.kills:

                def fails(candidate: Schedule) -> bool:
                    nonlocal best
                    result = trials.run(candidate)
                    shrink_results.append(result)
                    if on_trial is not None:
                        on_trial(result)
                    if not result.ok and len(candidate) < len(best.schedule):
                        best = result
                    return not result.ok

                shrink(smallest.schedule, fails)
            failure = Failure(best, _replay(target, options, seed, format_schedule(best.schedule)))
        completed = True
    finally:
        trials.close()
        if not keep and failure is None and completed:  # logs are kept for a failure
            shutil.rmtree(work, ignore_errors=True)
    if not any(life.landed for r in results for life in r.lives) and results:
        raise ProveError(
            "no kill landed: the pipeline drained its input before the first kill "
            "(give it more input with --records)"
        )
    return Proof(
        mode=target.mode,
        pipeline=shlex.join(target.replay_prefix[3:] + target.replay_suffix),
        seed=seed,
        steps=target.steps,
        trials=results,
        failure=failure,
        causes=explain(target, [*results, *shrink_results]),
        seconds=time.monotonic() - started,
        replay=_replay(target, options, seed, options.kills),
        work_dir=work if (keep or failure is not None) else None,
        shrink_trials=shrink_results,
    )
