"""The chaos matrix as a PNG heat map: one row per pattern, one cell per crash point.

Colour = what the audit observed (green ok, orange duplicated, red lost, grey error); the
text names the step and the outputs affected; a thick black frame marks a cell whose
observation differs from the prediction. It needs matplotlib, the ``onceflow[chaos]``
extra; without it the matrix is saved without its picture.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from onceflow.verify.chaos.cells import CellResult
from onceflow.verify.chaos.matrix import ChaosMatrix, observed_text
from onceflow.verify.chaos.scenarios import ONCEFLOW

COLOURS = {
    "ok": "#4caf50",
    "duplicated": "#ff9800",
    "lost": "#e53935",
    "lost+duplicated": "#8e0000",
    "error": "#9e9e9e",
    "other": "#8e24aa",
}
SHORT = {"rest": "R", "db": "D", "topic": "T"}
NO_MATPLOTLIB = "heat map skipped: matplotlib is not installed (pip install 'onceflow[chaos]')"


def cell_colour(result: CellResult) -> str:
    """The worst outcome over the cell's outputs."""
    if result.error:
        return COLOURS["error"]
    outcomes = set(result.observed.values())
    lost = any(o.startswith("lost") for o in outcomes)
    duplicated = any(o.endswith("duplicated") for o in outcomes)
    if lost and duplicated:
        return COLOURS["lost+duplicated"]
    if lost or duplicated:
        return COLOURS["lost" if lost else "duplicated"]
    return COLOURS["ok"] if outcomes <= {"ok"} else COLOURS["other"]


def cell_label(step: str, observed: str, outputs: dict[str, str]) -> str:
    """Two lines: the step, and the affected outputs (R=rest, D=db, T=topic) or 'ok'."""
    if observed in ("ok", "error"):
        affected = observed
    else:
        affected = " ".join(
            f"{SHORT.get(o, o)}:{'dup' if v == 'duplicated' else v}"
            for o, v in outputs.items()
            if v != "ok"
        )
    name = textwrap.shorten(step.replace("_", " "), width=44, placeholder="...")
    return "\n".join([*textwrap.wrap(name, width=22), affected])


def draw(matrix: ChaosMatrix, path: Path) -> Path | None:
    """The heat map as a PNG at ``path``; None (nothing drawn) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    rows = matrix.by_scenario()
    columns = max(len(results) for _, results in rows)
    figure, axes = plt.subplots(figsize=(2.0 * columns + 4.2, 0.8 * len(rows) + 1.6))
    for row, (scenario, results) in enumerate(rows):
        y = len(rows) - 1 - row
        for column, result in enumerate(results):
            observed = observed_text(result)
            axes.add_patch(
                Rectangle(
                    (column, y), 0.96, 0.9,
                    facecolor=cell_colour(result),
                    edgecolor="black" if not result.matches else "white",
                    linewidth=3 if not result.matches else 0.5,
                )
            )  # fmt: skip
            number = f"{result.number}. " if result.number is not None else ""
            label = number + cell_label(result.label, observed, result.observed)
            axes.text(column + 0.48, y + 0.45, label, ha="center", va="center", fontsize=6.5)
        claim = " *" if scenario.exactly_once else ""
        axes.text(-0.1, y + 0.45, scenario.title + claim, ha="right", va="center", fontsize=8)
    axes.set_xlim(-0.05, columns)
    axes.set_ylim(0, len(rows))
    axes.axis("off")
    as_predicted = len(matrix.results) - len(matrix.mismatches)
    on = "" if matrix.engine == ONCEFLOW else f"{matrix.engine}, "
    axes.set_title(
        f"onceflow chaos matrix: {as_predicted}/{len(matrix.results)} cells as predicted "
        f"({on}{matrix.database}; * = onceflow claims exactly-once; R=rest D=db T=topic)",
        fontsize=9,
    )
    legend = [Patch(color=COLOURS[k], label=k) for k in ("ok", "duplicated", "lost", "error")]
    legend.append(
        Patch(facecolor="white", edgecolor="black", linewidth=3, label="not as predicted")
    )
    axes.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=5,
                fontsize=7, frameon=False)  # fmt: skip
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
