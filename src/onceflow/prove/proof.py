"""A whole proof: the seeded schedules, one trial each, the verdict, and on a failure the
smallest failing schedule (shrunk) with the command that replays it."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.faults.results import Landing
from onceflow.faults.schedule import (
    ACTIONS,
    BROKER,
    COORDINATOR_CUT,
    DB_COMMIT,
    KILL,
    NETWORK,
    NODE_ACTIONS,
    PROGRESS,
    Fault,
    Schedule,
    ScheduleError,
    batch_schedule,
    format_schedule,
    new_seed,
    parse_schedule,
    progress_schedule,
    request_schedule,
    step_mix,
    step_sweep,
)
from onceflow.faults.workers import Life
from onceflow.prove.brokers import shared_cluster
from onceflow.prove.errors import ProveError
from onceflow.prove.explain import Cause, explain
from onceflow.prove.options import ProofOptions
from onceflow.prove.shrink import shrink
from onceflow.prove.target import Target, build_target
from onceflow.prove.trial import TrialResult, Trials

CLUSTER = "cluster"  # --faults cluster: every node fault
# What times a command's faults by default: its output growth; its requests held by the
# embedded broker before they apply (a death between its own steps) or after they
# applied, unanswered (a retry, or a broker that dies before answering); and, in a Python
# pipeline, the moment after a database commit of its outputs.
COMMAND_TRIGGERS = {
    KILL: (PROGRESS, "request_sent", "request_applied", DB_COMMIT),
    BROKER: ("request_applied",),
    NETWORK: ("request_applied", PROGRESS),
    COORDINATOR_CUT: (PROGRESS,),
}
FAULT_KINDS = (*ACTIONS, CLUSTER)


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
    def complete(self) -> bool:
        """Every planned fault of every trial landed (or could not apply to it)."""
        return not self.missed

    @property
    def kills(self) -> int:
        """Faults that landed (kills and the others)."""
        return sum(len(t.landed) for t in self.trials)

    @property
    def mid_processing(self) -> int:
        return sum(t.mid_processing for t in self.trials)

    @property
    def distinct_steps(self) -> int:
        return len({f.trigger for t in self.trials for f in t.landed})

    @property
    def kills_planned(self) -> int:
        return sum(len(t.schedule) for t in self.trials)

    @property
    def anomalies(self) -> int:
        return sum(len(t.report.anomalies) for t in self.trials)

    @property
    def missed(self) -> list[Landing]:
        """Planned faults that never landed, with why."""
        return [landing for t in self.trials for landing in t.run.landings if landing.missed]

    def verdict(self) -> str:
        if not self.held:
            assert self.failure is not None
            trial = self.failure.trial
            counts = ", ".join(f"{n} {kind}" for kind, n in trial.report.counts.items() if n)
            faults = tuple(trial.landed) or self.failure.schedule
            stopped = (" (it then stopped making progress: its outputs were audited as they "
                       "stood)") if trial.run.stuck else ""  # fmt: skip
            return f"exactly-once BROKEN: {counts} after {_faults(faults)}{stopped}"
        landed = [f for t in self.trials for f in t.landed]
        if self.mode == "runner" and all(f.kills_worker for f in landed):
            where = f"at {self.distinct_steps} distinct steps"
        else:
            where = f"({self.mid_processing} mid-processing)"
        held = f"exactly-once held: {_count(landed)} {where}, 0 anomalies"
        if self.complete:
            return held
        why = self.missed[0].note if self.missed else ""
        return (
            f"{held}; INCOMPLETE: {self.kills} of {self.kills_planned} planned faults landed "
            f"({why}): give the pipeline more input (--records) or fewer faults"
        )


def _count(faults: list[Fault]) -> str:
    """``3 kills`` or ``4 faults (2 kill, 2 broker)``."""
    kinds = Counter(f.action for f in faults)
    if set(kinds) <= {KILL}:
        return f"{len(faults)} kill{'s' * (len(faults) != 1)}"
    detail = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    return f"{len(faults)} fault{'s' * (len(faults) != 1)} ({detail})"


def _faults(schedule: Schedule) -> str:
    return f"{_count(list(schedule))} ({format_schedule(schedule)})"


def fault_kinds(names: tuple[str, ...]) -> tuple[str, ...]:
    kinds: list[str] = []
    for name in names:
        if name not in FAULT_KINDS:
            raise ProveError(f"unknown fault kind {name!r} in --faults; known: "
                             f"{', '.join(FAULT_KINDS)}")  # fmt: skip
        kinds += NODE_ACTIONS if name == CLUSTER else [name]
    return tuple(dict.fromkeys(kinds))


def _schedules(target: Target, options: ProofOptions, seed: int) -> list[Schedule]:
    steps = target.steps
    if options.kills:
        try:
            return [parse_schedule(options.kills, steps if steps else None)]
        except ScheduleError as error:
            raise ProveError(str(error)) from None
    quick, workers = options.quick, options.workers
    per_trial = options.command_kills or (3 if quick else 6)
    records = options.record_count
    once = target.once_per_start
    schedules: list[Schedule] = []
    for kind in fault_kinds(options.faults):
        if kind == KILL and target.mode == "runner":
            per_step = options.kills_per_step or (1 if quick else 2)
            schedules += step_sweep(steps, seed, per_step, once_per_start=once, workers=workers)
            if not quick:
                schedules.append(step_mix(steps, seed, len(steps), once_per_start=once,
                                          workers=workers))  # fmt: skip
        elif kind == KILL and steps:  # a Spark job through onceflow's sinks
            schedules.append(batch_schedule(seed, steps, per_trial))
            if not quick:
                schedules.append(progress_schedule(seed, per_trial, records))
        elif kind in COMMAND_TRIGGERS and target.mode != "runner":
            triggers = COMMAND_TRIGGERS[kind]
            rounds = 1 if quick or kind != KILL else 2
            each = options.command_kills or max(per_trial, len(triggers) * (1 if quick else 2))
            schedules += [request_schedule(seed + r, each, triggers, action=kind,
                                           workers=workers, records=records)
                          for r in range(rounds)]  # fmt: skip
        elif kind == BROKER:  # a Runner: its produce and commit requests
            schedules.append(request_schedule(seed, per_trial, ("request_applied",),
                                              action=BROKER))  # fmt: skip
        else:
            rounds = 1 if quick or kind != KILL else 2
            schedules += [progress_schedule(seed + r, per_trial, records, actions=(kind,),
                                            workers=workers) for r in range(rounds)]  # fmt: skip
    return schedules


def _replay(target: Target, options: ProofOptions, seed: int, kills: str | None) -> str:
    words = list(target.replay_prefix)
    for flag, value, default in (
        ("--records", options.records, None),
        ("--keys", options.keys, 8),
        ("--partitions", options.partitions, 3),
        ("--workers", options.workers, 1),
        ("--schema", options.schema, None),
        ("--topics-file", options.topics_file, None),
        ("--dlq", options.dead_letter_topic, None),
        ("--id-field", options.id_field, None),
        ("--key-field", options.key_field, None),
        ("--database-url", options.database_url, None),
        ("--bootstrap", options.bootstrap, None),
    ):
        if value is not None and value != default:
            words += [flag, str(value)]
    if options.database:
        words.append("--database")
    if options.kafka_cluster:
        words.append("--kafka-cluster")
    if options.quick:
        words.append("--quick")
    if not kills and options.faults != (KILL,):
        words += ["--faults", ",".join(options.faults)]
    words += ["--seed", str(seed)]
    if kills:
        words += ["--kills", kills]
    return shlex.join(words + target.replay_suffix)


def run_proof(
    options: ProofOptions,
    on_life: Callable[[int, Life], None] | None = None,
    on_trial: Callable[[TrialResult], None] | None = None,
    on_landing: Callable[[int, Landing], None] | None = None,
) -> Proof:
    """Run the proof; ProveError for bad input, ProveFailure when prove itself cannot.
    Nothing is left running either way."""
    started = time.monotonic()
    target = build_target(options)
    _schedules(target, options, 0)  # a bad --kills or --faults fails before anything starts
    seed = options.seed if options.seed is not None else new_seed()
    keep = options.work_dir is not None
    work = options.work_dir or Path(tempfile.mkdtemp(prefix="onceflow-prove-"))
    results: list[TrialResult] = []
    shrink_results: list[TrialResult] = []
    failure = None
    completed = False
    with contextlib.ExitStack() as stack:
        trials = Trials(target, options, work, on_life, on_landing,
                        shared_cluster(options, work, stack))  # fmt: skip
        stack.callback(trials.close)

        def trial(schedule: Schedule, into: list[TrialResult]) -> TrialResult:
            result = trials.run(schedule)
            into.append(result)
            if on_trial is not None:
                on_trial(result)
            return result

        for schedule in _schedules(target, options, seed):
            trial(schedule, results)
        failing = [r for r in results if not r.ok]
        if failing:
            smallest = min(failing, key=lambda r: (len(r.landed), r.number))
            best = smallest
            landed = tuple(smallest.landed)
            if options.shrink and len(landed) > 1 and not options.kills:

                def fails(candidate: Schedule) -> bool:
                    nonlocal best
                    result = trial(candidate, shrink_results)
                    if not result.ok and len(result.landed) < len(best.landed):
                        best = result
                    return not result.ok

                shrink(landed, fails)
            replay_kills = format_schedule(best.landed or best.schedule)
            failure = Failure(best, _replay(target, options, seed, replay_kills))
        completed = True
    if not keep and failure is None and completed:  # logs are kept for a failure
        shutil.rmtree(work, ignore_errors=True)
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
