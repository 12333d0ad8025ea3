"""A proof as a terminal summary (rich), JSON and Markdown."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from onceflow.faults.schedule import format_schedule
from onceflow.prove.proof import Proof
from onceflow.prove.trial import TrialResult

REPORT_VERSION = 1
ANOMALIES_SHOWN = 5


def _trial_dict(trial: TrialResult) -> dict[str, Any]:
    return {
        "trial": trial.number,
        "schedule": format_schedule(trial.schedule),
        "kills_landed": [str(k) for k in trial.landed],
        "kills_missed": [
            {"fault": str(m.fault), "why": m.note} for m in trial.run.landings if not m.landed
        ],
        "kills_mid_processing": trial.mid_processing,
        "lives": len(trial.lives),
        "outcome": trial.outcome,
        "counts": {k: n for k, n in trial.report.counts.items() if n},
        "seconds": round(trial.seconds, 2),
    }


def to_dict(proof: Proof) -> dict[str, Any]:
    failure = None
    if proof.failure is not None:
        trial = proof.failure.trial
        failure = {
            "schedule": format_schedule(trial.schedule),
            "steps": sorted({k.trigger for k in trial.schedule}),
            "counts": {k: n for k, n in trial.report.counts.items() if n},
            "anomalies": [a.to_dict() for a in trial.report.anomalies[:50]],
            "replay": proof.failure.replay,
            "work_dir": str(trial.directory),
        }
    return {
        "version": REPORT_VERSION,
        "verdict": proof.verdict(),
        "held": proof.held,
        "complete": proof.complete,
        "mode": proof.mode,
        "pipeline": proof.pipeline,
        "seed": proof.seed,
        "kills": proof.kills,
        "kills_planned": proof.kills_planned,
        "kills_mid_processing": proof.mid_processing,
        "distinct_steps": proof.distinct_steps,
        "anomalies": proof.anomalies,
        "steps": proof.steps,
        "trials": [_trial_dict(t) for t in proof.trials],
        "shrink_trials": [_trial_dict(t) for t in proof.shrink_trials],
        "failure": failure,
        "causes": [{"name": c.name, "evidence": c.evidence, "fix": c.fix} for c in proof.causes],
        "seconds": round(proof.seconds, 1),
        "replay": proof.replay,
    }


def to_json(proof: Proof) -> str:
    return json.dumps(to_dict(proof), indent=2)


def render(proof: Proof, console: Console) -> None:
    console.print(f"seed {proof.seed}  ({proof.kills} of {proof.kills_planned} planned faults "
                  f"landed, {proof.mid_processing} of them mid-processing; "
                  f"{len(proof.trials) + len(proof.shrink_trials)} trials, "
                  f"{proof.seconds:.0f} s)")  # fmt: skip
    table = Table(title=f"onceflow prove {proof.mode}: {proof.pipeline}")
    for column in ("trial", "faults (planned)", "landed", "outcome", "anomalies", "s"):
        table.add_column(column, overflow="fold")
    for trial in [*proof.trials, *proof.shrink_trials]:
        colour = "green" if trial.ok else "red"
        table.add_row(
            str(trial.number),
            format_schedule(trial.schedule),
            str(len(trial.landed)),
            f"[{colour}]{trial.outcome}[/{colour}]",
            str(len(trial.report.anomalies)),
            f"{trial.seconds:.1f}",
        )
    console.print(table)
    if proof.failure is not None:
        trial = proof.failure.trial
        console.print(f"[bold red]{proof.verdict()}[/bold red]")
        faults = trial.landed or list(trial.schedule)
        console.print(f"smallest failing schedule: {format_schedule(faults)} "
                      f"(step {', '.join(sorted({k.trigger for k in faults}))})")  # fmt: skip
        for landing in trial.run.landings:
            if landing.landed and landing.note:
                console.print(f"  {landing.fault}: {landing.note}")
        for anomaly in trial.report.anomalies[:ANOMALIES_SHOWN]:
            console.print(f"  {anomaly.kind} {anomaly.id} (key {anomaly.key}) in "
                          f"{anomaly.sink} {anomaly.detail or ''}")  # fmt: skip
        more = len(trial.report.anomalies) - ANOMALIES_SHOWN
        if more > 0:
            console.print(f"  ... and {more} more")
        console.print(f"replay: {proof.failure.replay}", soft_wrap=True)
        console.print(f"logs: {trial.directory}", soft_wrap=True)
    else:
        colour = "green" if proof.complete else "yellow"
        console.print(f"[bold {colour}]{proof.verdict()}[/bold {colour}]")
        console.print(f"replay: {proof.replay}", soft_wrap=True)
    for cause in proof.causes:
        console.print(f"[yellow]likely cause: {cause.name}[/yellow]: {cause.evidence}; "
                      f"fix: {cause.fix}")  # fmt: skip


def to_markdown(proof: Proof, picture: str | None = None) -> str:
    lines = [f"# onceflow prove {proof.mode}: `{proof.pipeline}`", "",
             f"**{proof.verdict()}**", "",
             f"Seed {proof.seed}; {proof.kills} of {proof.kills_planned} planned faults landed; "
             f"{proof.seconds:.0f} s.", ""]  # fmt: skip
    if picture:
        lines += [f"![kills by step]({picture})", ""]
    lines += ["| trial | faults (planned) | landed | outcome | anomalies |",
              "|---|---|---|---|---|"]  # fmt: skip
    for trial in [*proof.trials, *proof.shrink_trials]:
        lines.append(f"| {trial.number} | `{format_schedule(trial.schedule)}` | "
                     f"{len(trial.landed)} | {trial.outcome} | "
                     f"{len(trial.report.anomalies)} |")  # fmt: skip
    lines.append("")
    if proof.failure is not None:
        trial = proof.failure.trial
        lines += [f"Smallest failing schedule: `{format_schedule(trial.schedule)}`", ""]
        for anomaly in trial.report.anomalies[:ANOMALIES_SHOWN]:
            lines.append(f"- {anomaly.kind} `{anomaly.id}` (key {anomaly.key}) in {anomaly.sink}")
        lines += ["", "Replay:", "", "```sh", proof.failure.replay, "```", ""]
    else:
        lines += ["Replay:", "", "```sh", proof.replay, "```", ""]
    if proof.causes:
        lines += ["Likely causes:", ""]
        lines += [f"- **{c.name}**: {c.evidence}. Fix: {c.fix}." for c in proof.causes]
        lines.append("")
    return "\n".join(lines)
