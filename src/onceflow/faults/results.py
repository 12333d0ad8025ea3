"""What a fault run is given and gives back: its limits, what became of each fault
(``Landing``), the run's result, and ``RunError`` when the pipeline misbehaved."""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow.faults.schedule import Fault
from onceflow.faults.workers import Life


class RunError(RuntimeError):
    """The pipeline misbehaved (exited at once, stalled, was killed by someone else)."""


@dataclass(slots=True)
class Limits:
    stall_s: float = 60.0  # no output growth for this long while not done
    settle_s: float = 2.0  # outputs unchanged this long (and drained): done
    # ... while a live worker has a fault armed inside it: its outputs can be complete
    # before the step (a Spark task's direct rows are in before the driver's commit, a
    # second later under load), so a fault not reached yet is out of reach only after this
    armed_settle_s: float = 15.0
    start_s: float = 60.0  # no output at all this long after the start
    timeout_s: float | None = None  # the whole run, whatever happens


@dataclass(frozen=True, slots=True)
class Landing:
    """What became of one fault of the schedule."""

    fault: Fault
    landed: bool
    seconds: float  # since the run started
    outputs: int  # the outputs when it landed (or when the run gave up on it)
    note: str = ""
    applicable: bool = True  # False: the pipeline never does what it waits for

    @property
    def missed(self) -> bool:
        """Planned, possible, and not landed: the proof is weaker than planned."""
        return not self.landed and self.applicable


@dataclass(slots=True)
class RunResult:
    landings: list[Landing] = field(default_factory=list)
    lives: list[Life] = field(default_factory=list)
    outputs: int = 0  # at the end
    seconds: float = 0.0
    restarts: int = 0  # lives that ended without a fault (an exit, a crash) and began again
    stalls: int = 0  # times a supervised run SIGKILLed and restarted its stalled workers
    stuck: bool = False  # ended without draining: it stopped with faults done, input given

    @property
    def landed(self) -> list[Fault]:
        return [landing.fault for landing in self.landings if landing.landed]
