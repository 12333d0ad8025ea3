"""The proof as a PNG heat map in the chaos matrix's style (docs/guarantees.png): one row
per trial, one cell per kill in its schedule, coloured by the trial's audit outcome.

Colours come from the chaos heat map (green ok, orange duplicated, red lost); a thick
black frame marks the smallest failing schedule. Needs matplotlib (``onceflow[chaos]``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from onceflow.prove.proof import Proof
from onceflow.prove.schedule import PROGRESS
from onceflow.prove.trial import TrialResult
from onceflow.verify.chaos.heatmap import COLOURS


def colour(trial: TrialResult) -> str:
    return COLOURS.get(trial.outcome, COLOURS["other"])


def label(step: str, occurrence: int, landed: bool) -> str:
    text = f"+{occurrence} rows" if step == PROGRESS else f"{step.replace('_', ' ')} #{occurrence}"
    return "\n".join(textwrap.wrap(text, width=18)) + ("" if landed else "\n(not reached)")


def draw(proof: Proof, path: Path) -> Path | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    rows = [*proof.trials, *proof.shrink_trials]
    columns = max([len(t.schedule) for t in rows] + [1])
    figure, axes = plt.subplots(figsize=(1.8 * columns + 3.6, 0.7 * len(rows) + 1.6))
    failing = proof.failure.trial if proof.failure is not None else None
    for row, trial in enumerate(rows):
        y = len(rows) - 1 - row
        landed = len(trial.landed)
        for column, kill in enumerate(trial.schedule):
            axes.add_patch(Rectangle(
                (column, y), 0.96, 0.9, facecolor=colour(trial),
                edgecolor="black" if trial is failing else "white",
                linewidth=3 if trial is failing else 0.5,
            ))  # fmt: skip
            axes.text(column + 0.48, y + 0.45, label(kill.step, kill.occurrence, column < landed),
                      ha="center", va="center", fontsize=6.5)  # fmt: skip
        name = f"trial {trial.number}: {trial.outcome}"
        axes.text(-0.1, y + 0.45, name, ha="right", va="center", fontsize=8)
    axes.set_xlim(-0.05, columns)
    axes.set_ylim(0, len(rows))
    axes.axis("off")
    axes.set_title(textwrap.shorten(f"onceflow prove {proof.mode} {proof.pipeline}: "
                                    f"{proof.verdict()} (seed {proof.seed})", 140),
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
