"""The fault engine's supervision of a run until its workers exit (the chaos matrix's
failover cells): a worker whose progress stops is SIGKILLed and restarted, as a liveness
probe would, however the run's input is paced."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.faults.process import ProcessGroup
from onceflow.faults.progress import Counter
from onceflow.faults.results import Limits, RunError
from onceflow.faults.run import STALL_RESTARTS, FaultRun


def test_a_wedged_worker_is_killed_and_restarted_until_the_run_gives_up(tmp_path: Path) -> None:
    lives: list[int] = []

    def start(_worker: int, life: int, _arming: dict[str, str]) -> ProcessGroup:
        lives.append(life)
        return ProcessGroup(["sleep", "600"], tmp_path / "worker.log")  # never progresses

    limits = Limits(stall_s=0.5, start_s=0.5, timeout_s=60)
    run = FaultRun(start, (), tmp_path, until="exit", progress=Counter(lambda: 0),
                   limits=limits, supervised=True)  # fmt: skip
    with pytest.raises(RunError, match="no output for 0 s with input left"):
        run.run()
    assert run.result.stalls == STALL_RESTARTS
    assert lives == list(range(1, STALL_RESTARTS + 2))
