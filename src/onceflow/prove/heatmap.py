"""The proof as a PNG heat map in the chaos matrix's style (docs/guarantees.png).

Runner mode: the first row has one cell per crash point (the trial that killed the
pipeline only at that step), coloured by what the audit found. Every other trial (a
mixed schedule, a command-mode schedule, a shrinking step) gets a row with one cell per
kill. Colours come from the chaos heat map (green ok, orange duplicated, red lost); a
thick black frame marks the smallest failing schedule. Needs matplotlib
(``onceflow[chaos]``); without it nothing is drawn.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from onceflow.prove.proof import Proof
from onceflow.prove.schedule import PROGRESS, Kill
from onceflow.prove.trial import TrialResult
from onceflow.verify.chaos.heatmap import COLOURS

Cell = tuple[str, TrialResult]
Row = tuple[str, list[Cell]]


def colour(trial: TrialResult) -> str:
    return COLOURS.get(trial.outcome, COLOURS["other"])


def kill_label(kill: Kill, landed: bool) -> str:
    if kill.step == PROGRESS:
        text = f"kill after +{kill.occurrence} rows"
    else:
        text = f"{kill.step.replace('_', ' ')} #{kill.occurrence}"
    return "\n".join(textwrap.wrap(text, width=18)) + ("" if landed else "\n(not reached)")


def rows(proof: Proof) -> list[Row]:
    by_step: list[Cell] = []
    others: list[Row] = []
    for trial in proof.trials:
        steps = {kill.step for kill in trial.schedule}
        if proof.mode == "runner" and len(steps) == 1 and not by_step_has(by_step, steps):
            (step,) = steps
            numbers = ",".join(f"#{kill.occurrence}" for kill in trial.schedule)
            label = "\n".join(textwrap.wrap(step.replace("_", " "), width=18)) + f"\n{numbers}"
            label += f"\n{trial.outcome}"
            by_step.append((label, trial))
        else:
            others.append(_schedule_row(trial, "trial"))
    result = [("each step", by_step)] if by_step else []
    result += others
    result += [_schedule_row(trial, "shrink") for trial in proof.shrink_trials]
    return result


def by_step_has(cells: list[Cell], steps: set[str]) -> bool:
    return any(kill.step in steps for _, trial in cells for kill in trial.schedule)


def _schedule_row(trial: TrialResult, kind: str) -> Row:
    landed = len(trial.landed)
    cells = [(kill_label(k, i < landed), trial) for i, k in enumerate(trial.schedule)]
    return f"{kind} {trial.number}: {trial.outcome}", cells


def draw(proof: Proof, path: Path) -> Path | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    grid = rows(proof)
    columns = max([len(cells) for _, cells in grid] + [1])
    figure, axes = plt.subplots(figsize=(1.6 * columns + 3.2, 0.8 * len(grid) + 1.6))
    failing = proof.failure.trial if proof.failure is not None else None
    for row, (title, cells) in enumerate(grid):
        y = len(grid) - 1 - row
        for column, (text, trial) in enumerate(cells):
            framed = trial is failing
            axes.add_patch(Rectangle(
                (column, y), 0.96, 0.9, facecolor=colour(trial),
                edgecolor="black" if framed else "white", linewidth=3 if framed else 0.5,
            ))  # fmt: skip
            axes.text(column + 0.48, y + 0.45, text, ha="center", va="center", fontsize=6.5)
        axes.text(-0.1, y + 0.45, title, ha="right", va="center", fontsize=8)
    axes.set_xlim(-0.05, columns)
    axes.set_ylim(0, len(grid))
    axes.axis("off")
    title = f"onceflow prove {proof.mode} {proof.pipeline}"
    axes.set_title(textwrap.shorten(title, 110) + f"\n{proof.verdict()} (seed {proof.seed})",
                   fontsize=9)  # fmt: skip
    legend = [Patch(color=COLOURS[k], label=k) for k in ("ok", "duplicated", "lost")]
    legend.append(Patch(facecolor="white", edgecolor="black", linewidth=3,
                        label="smallest failing schedule"))  # fmt: skip
    axes.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=4,
                fontsize=7, frameon=False)  # fmt: skip
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
