"""Fault schedules: which faults a run injects, when, and where, in one text form.

A fault is written ``[ACTION/]TRIGGER:N[@WORKER]``:

* ACTION is what happens (default ``kill``): ``kill`` SIGKILLs a pipeline worker's whole
  process group and starts it again; ``broker`` SIGKILLs the embedded broker and starts
  it again; ``network`` drops a worker's connections and refuses new ones for a while;
  ``coordinator-cut`` drops only its connections to the group coordinator (it loses its
  group but goes on fetching, as a client a network splits from one broker does);
  ``delay`` holds a worker's traffic back for a while; ``leader``,
  ``group-coordinator`` and ``txn-coordinator`` SIGKILL the Apache Kafka node leading an
  output partition or coordinating the pipeline's group or transactional id, and start it
  again a few seconds later; ``power-loss``, ``disk-full`` and ``db-lock`` are the chaos
  matrix's faults of the broker's files and of the database.
* TRIGGER:N is when: ``progress:N`` once the outputs grew by N records since the previous
  fault (since its end, for one that lasts); ``time:N`` N milliseconds into the life it
  is armed for; a crash point name (``after_db_commit:2``, see ``onceflow.crash_points``)
  the N-th time the worker reaches it in this life: a ``kill`` there is the worker
  SIGKILLing itself, any other action pauses the worker there, happens, and lets it go
  on; a Spark sink step
  (``database.after_commit:3``) when micro-batch N reaches it; a request trap, named after
  the Kafka API and whether the broker has it but not applied it (``_sent``) or applied it
  and not answered it (``_applied``): ``offset_commit_sent:2`` when the worker's 2nd
  OffsetCommit since the previous fault reached the embedded broker (the process dies
  after its database commit and before its offset commit), ``produce_applied:1`` when its
  produce request is durable but unanswered (``broker/produce_applied:1``: the producer
  retries a batch that was written); ``request_sent`` and ``request_applied`` trap any
  request with an effect (a produce, an offset commit, the end of a transaction). The
  broker holds that request while the fault happens (``onceflow.broker.traps``), so these
  land exactly, whatever the timing. ``db_commit:N``, in a Python pipeline that uses
  sqlite3: right after its N-th database commit that wrote its outputs, before its next
  step (``faults/pyhooks``).
* WORKER (1-based, default 1) is which of the pipeline's processes it concerns; a request
  trap may say ``@any``: whichever worker first sends its N-th such request.

A schedule is a tuple of faults; ``a,b,c`` in text. The same seed gives the same
schedules (``random.Random``).
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.broker.traps import ANY_EFFECT

PROGRESS = "progress"
DB_COMMIT = "db_commit"
TIME = "time"
KILL = "kill"
BROKER = "broker"
NETWORK = "network"
COORDINATOR_CUT = "coordinator-cut"
DELAY = "delay"
PAUSE = "pause"
LEADER = "leader"
GROUP_COORDINATOR = "group-coordinator"
TXN_COORDINATOR = "txn-coordinator"
POWER_LOSS = "power-loss"
DISK_FULL = "disk-full"
DB_LOCK = "db-lock"
NODE_ACTIONS = (LEADER, GROUP_COORDINATOR, TXN_COORDINATOR)
# Kafka APIs a request trap can hold (onceflow.broker.traps): name -> API key; "request"
# is any request with an effect (produce, offset commits, transaction ends)
TRAPPED_APIS = {"request": ANY_EFFECT, "produce": 0, "offset_commit": 8, "join_group": 11,
                "sync_group": 14, "add_offsets_to_txn": 25, "end_txn": 26,
                "txn_offset_commit": 28}  # fmt: skip
SENT, APPLIED = "sent", "applied"
REQUEST_TRIGGERS = {f"{api}_{phase}": (key, phase) for api, key in TRAPPED_APIS.items()
                    for phase in (SENT, APPLIED)}  # fmt: skip
NETWORK_ACTIONS = (NETWORK, COORDINATOR_CUT, DELAY, PAUSE)
ACTIONS = (KILL, BROKER, *NETWORK_ACTIONS, *NODE_ACTIONS, POWER_LOSS, DISK_FULL, DB_LOCK)
MAX_OCCURRENCE = 3  # a crash-point kill lands in one of the first three batches of a life
FAULT_TEXT = re.compile(r"(?:(?P<action>[a-z-]+)/)?(?P<trigger>[\w.]+)(?::(?P<n>-?\d+))?"
                        r"(?:@(?P<worker>-?\d+|any))?")  # fmt: skip
ANY_WORKER = 0


class ScheduleError(ValueError):
    """A fault or schedule that cannot be read."""


@dataclass(frozen=True, slots=True)
class Fault:
    trigger: str
    occurrence: int = 1
    action: str = KILL
    worker: int = 1

    @property
    def at_crash_point(self) -> bool:
        """Triggered inside the worker (a crash or pause point)."""
        return self.trigger not in (PROGRESS, TIME) and not self.trapped

    @property
    def in_a_life(self) -> bool:
        """Armed for one life of its worker (a crash or pause point, or ``time:N``, N ms into
        the life), rather than watched across lives (output growth, request traps)."""
        return self.at_crash_point or self.trigger == TIME

    @property
    def at_request(self) -> bool:
        """Triggered by a request trap of the embedded broker."""
        return self.trigger in REQUEST_TRIGGERS

    @property
    def at_commit(self) -> bool:
        """Triggered by a database commit trap in a Python pipeline."""
        return self.trigger == DB_COMMIT

    @property
    def trapped(self) -> bool:
        """Held by a trap (a request, a database commit) while the fault happens."""
        return self.at_request or self.at_commit

    @property
    def at_spark_step(self) -> bool:
        return "." in self.trigger

    @property
    def kills_worker(self) -> bool:
        return self.action == KILL

    def __str__(self) -> str:
        action = "" if self.action == KILL else f"{self.action}/"
        worker = {1: "", ANY_WORKER: "@any"}.get(self.worker, f"@{self.worker}")
        return f"{action}{self.trigger}:{self.occurrence}{worker}"


Schedule = tuple[Fault, ...]


def format_schedule(schedule: Sequence[Fault]) -> str:
    return ",".join(str(fault) for fault in schedule)


def parse_fault(text: str, known_steps: Sequence[str] | None = None) -> Fault:
    match = FAULT_TEXT.fullmatch(text.strip())
    if match is None:
        raise ScheduleError(f"bad fault {text!r}: expected [ACTION/]STEP:N[@WORKER]")
    action = match["action"] or KILL
    if action not in ACTIONS:
        raise ScheduleError(f"unknown fault {action!r} in {text!r}; known: {', '.join(ACTIONS)}")
    occurrence = int(match["n"]) if match["n"] is not None else 1
    named = match["worker"]
    worker = 1 if named is None else ANY_WORKER if named == "any" else int(named)
    if occurrence < 1:
        raise ScheduleError(f"bad fault {text!r}: N counts from 1")
    if worker < 1 and named != "any":
        raise ScheduleError(f"bad fault {text!r}: workers count from 1")
    fault = Fault(match["trigger"], occurrence, action, worker)
    if worker == ANY_WORKER and not fault.trapped:
        raise ScheduleError(f"bad fault {text!r}: only a trap can name @any worker")
    steps = known_steps
    if steps is not None and fault.at_crash_point and fault.trigger not in steps:
        known = ", ".join([PROGRESS, TIME, DB_COMMIT, *steps, *REQUEST_TRIGGERS])
        raise ScheduleError(f"unknown step {fault.trigger!r} in {text!r}; known: {known}")
    return fault


def parse_schedule(text: str, known_steps: Sequence[str] | None = None) -> Schedule:
    faults = tuple(parse_fault(item, known_steps) for item in text.split(",") if item.strip())
    if not faults:
        raise ScheduleError("the schedule names no fault")
    return faults


def trigger_queues(
    schedule: Schedule, workers: int, *, request_traps: bool, commit_traps: bool
) -> tuple[dict[int, deque[Fault]], deque[Fault]]:
    """The schedule as a run arms it: per worker (1..``workers``) the faults of a life, in
    order, and the faults watched across lives; ValueError for a fault the run cannot
    inject (no such worker, a request trap without the broker's traps, ...)."""
    inside: dict[int, deque[Fault]] = {index: deque() for index in range(1, workers + 1)}
    watched: deque[Fault] = deque()
    for fault in schedule:
        if fault.worker > workers:
            raise ValueError(f"fault {fault} names worker {fault.worker} of {workers}")
        if fault.worker == ANY_WORKER and not fault.trapped:
            raise ValueError(f"fault {fault}: only a request trap can hold any worker")
        if fault.at_request and not request_traps:
            raise ValueError(f"fault {fault} needs the embedded broker's request traps")
        if fault.at_commit and not commit_traps:
            raise ValueError(f"fault {fault} needs the pipeline's commit traps")
        if fault.in_a_life:
            inside[fault.worker].append(fault)
        else:
            watched.append(fault)
    return inside, watched


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 1_000_000)


def step_sweep(
    steps: Sequence[str], seed: int, per_step: int, *, once_per_start: frozenset[str] = frozenset(),
    action: str = KILL, workers: int = 1,
) -> list[Schedule]:  # fmt: skip
    """One schedule per step: ``per_step`` faults at that step, in random batches (and on
    random workers)."""
    rng = random.Random(f"sweep-{seed}")
    return [
        tuple(_at_step(rng, step, once_per_start, action, workers) for _ in range(per_step))
        for step in steps
    ]


def step_mix(
    steps: Sequence[str], seed: int, faults: int, *, once_per_start: frozenset[str] = frozenset(),
    action: str = KILL, workers: int = 1,
) -> Schedule:  # fmt: skip
    """Faults at random steps and batches, for bugs that need two different faults."""
    rng = random.Random(f"mixed-{seed}")
    return tuple(
        _at_step(rng, rng.choice(list(steps)), once_per_start, action, workers)
        for _ in range(faults)
    )


def _at_step(
    rng: random.Random, step: str, once_per_start: frozenset[str], action: str, workers: int
) -> Fault:
    top = 1 if step in once_per_start else MAX_OCCURRENCE
    return Fault(step, rng.randint(1, top), action, rng.randint(1, workers))


def progress_schedule(
    seed: int, faults: int, records: int, *, actions: Sequence[str] = (KILL,), workers: int = 1
) -> Schedule:
    """Faults once the outputs grew by a random number of records, spread so that the
    faults together see about half the input (the rest drains after the last one)."""
    rng = random.Random(f"progress-{seed}")
    top = max(2, records // (2 * faults))
    return tuple(
        Fault(PROGRESS, rng.randint(1, top), rng.choice(list(actions)), rng.randint(1, workers))
        for _ in range(faults)
    )


def request_schedule(
    seed: int, faults: int, triggers: Sequence[str], *, action: str = KILL, workers: int = 1,
    records: int = 600,
) -> Schedule:  # fmt: skip
    """Faults at ``triggers`` taken in turn (in a seeded order), each at the first to third
    such event after the previous fault (``progress``: after a few outputs). With several
    workers a request trap holds whichever worker's request comes first (``@any``): a
    worker without partitions at that moment sends none."""
    rng = random.Random(f"requests-{seed}")
    order = list(triggers)
    rng.shuffle(order)
    top = max(2, records // (2 * faults))
    schedule = []
    for n in range(faults):
        trigger = order[n % len(order)]
        occurrence = rng.randint(1, top if trigger == PROGRESS else MAX_OCCURRENCE)
        worker = rng.randint(1, workers)
        if workers > 1 and (trigger in REQUEST_TRIGGERS or trigger == DB_COMMIT):
            worker = ANY_WORKER
        schedule.append(Fault(trigger, occurrence, action, worker))
    return tuple(schedule)


def batch_schedule(seed: int, steps: Sequence[str], faults: int, first_batch: int = 1) -> Schedule:
    """Spark sink steps: a kill at a random step of micro-batches in increasing order (a
    restarted query goes on from its checkpoint, so batch ids keep counting)."""
    rng = random.Random(f"batches-{seed}")
    batch = first_batch
    schedule = []
    for _ in range(faults):
        schedule.append(Fault(rng.choice(list(steps)), batch))
        batch += rng.randint(1, 2)
    return tuple(schedule)
