"""The proof as a PNG heat map in the chaos matrix's style (docs/guarantees.png).

Runner mode: the first row has one cell per crash point (the trial that killed the
pipeline only at that step), coloured by what the audit found. Every other trial (a
mixed schedule, a command-mode schedule, a shrinking step) gets a row with one cell per
fault. A thick black frame marks the smallest failing schedule. Needs matplotlib
(``onceflow[chaos]``); without it nothing is drawn.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from onceflow.faults.heatmap import GridCell, GridRow, draw_grid
from onceflow.faults.schedule import ANY_WORKER, KILL, PROGRESS, Fault
from onceflow.prove.proof import Proof
from onceflow.prove.trial import TrialResult


def fault_label(fault: Fault, landed: bool) -> str:
    if fault.trigger == PROGRESS:
        text = f"after +{fault.occurrence} rows"
    else:
        text = f"{fault.trigger.replace('_', ' ')} #{fault.occurrence}"
    if fault.action != KILL:
        text = f"{fault.action} {text}"
    if fault.worker != 1:
        text += " (any worker)" if fault.worker == ANY_WORKER else f" (worker {fault.worker})"
    return "\n".join(textwrap.wrap(text, width=18)) + ("" if landed else "\n(not reached)")


def rows(proof: Proof) -> list[GridRow]:
    failing = proof.failure.trial if proof.failure is not None else None
    by_step: list[GridCell] = []
    seen: set[str] = set()
    others: list[GridRow] = []
    for trial in proof.trials:
        steps = {fault.trigger for fault in trial.schedule}
        single = len(steps) == 1 and all(f.action == KILL for f in trial.schedule)
        if proof.mode == "runner" and single and not steps & seen:
            (step,) = steps
            seen |= steps
            numbers = ",".join(f"#{fault.occurrence}" for fault in trial.schedule)
            label = "\n".join(textwrap.wrap(step.replace("_", " "), width=18))
            by_step.append(GridCell(f"{label}\n{numbers}\n{trial.outcome}", trial.outcome,
                                    trial is failing))  # fmt: skip
        else:
            others.append(_schedule_row(trial, "trial", failing))
    result = [GridRow("each step", by_step)] if by_step else []
    shrinking = [_schedule_row(trial, "shrink", failing) for trial in proof.shrink_trials]
    return [*result, *others, *shrinking]


def _schedule_row(trial: TrialResult, kind: str, failing: TrialResult | None) -> GridRow:
    landed = set(trial.landed)
    cells = [GridCell(fault_label(f, f in landed), trial.outcome, trial is failing)
             for f in trial.schedule]  # fmt: skip
    return GridRow(f"{kind} {trial.number}: {trial.outcome}", cells)


def draw(proof: Proof, path: Path) -> Path | None:
    title = textwrap.shorten(f"onceflow prove {proof.mode} {proof.pipeline}", 110)
    return draw_grid(rows(proof), f"{title}\n{proof.verdict()} (seed {proof.seed})", path,
                     ("ok", "duplicated", "lost"), "smallest failing schedule")  # fmt: skip
