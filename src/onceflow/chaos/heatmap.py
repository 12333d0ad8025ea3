"""The chaos matrix as a PNG heat map: one row per pattern, one cell per crash point.

Colour = what the audit observed (green ok, orange duplicated, red lost, grey error); the
text names the step and the outputs affected; a thick black frame marks a cell whose
observation differs from the prediction. It needs matplotlib, the ``onceflow[chaos]``
extra; without it the matrix is saved without its picture.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from onceflow.chaos.cells import CellResult
from onceflow.chaos.matrix import ChaosMatrix, observed_text
from onceflow.chaos.scenarios import ONCEFLOW
from onceflow.faults.heatmap import COLOURS, NO_MATPLOTLIB, GridCell, GridRow, draw_grid

__all__ = ["NO_MATPLOTLIB", "draw"]

SHORT = {"rest": "R", "db": "D", "topic": "T"}


def cell_outcome(result: CellResult) -> str:
    """The worst outcome over the cell's outputs."""
    if result.error:
        return "error"
    outcomes = set(result.observed.values())
    lost = any(o.startswith("lost") for o in outcomes)
    duplicated = any(o.endswith("duplicated") for o in outcomes)
    if lost and duplicated:
        return "lost+duplicated"
    if lost or duplicated:
        return "lost" if lost else "duplicated"
    return "ok" if outcomes <= {"ok"} else "other"


def cell_colour(result: CellResult) -> str:
    return COLOURS[cell_outcome(result)]


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
    rows = []
    for scenario, results in matrix.by_scenario():
        cells = []
        for result in results:
            number = f"{result.number}. " if result.number is not None else ""
            label = number + cell_label(result.label, observed_text(result), result.observed)
            cells.append(GridCell(label, cell_outcome(result), framed=not result.matches))
        rows.append(GridRow(scenario.title + (" *" if scenario.exactly_once else ""), cells))
    as_predicted = len(matrix.results) - len(matrix.mismatches)
    on = "" if matrix.engine == ONCEFLOW else f"{matrix.engine}, "
    title = (
        f"onceflow chaos matrix: {as_predicted}/{len(matrix.results)} cells as predicted "
        f"({on}{matrix.database}; * = onceflow claims exactly-once; R=rest D=db T=topic)"
    )
    return draw_grid(rows, title, path, ("ok", "duplicated", "lost", "error"),
                     "not as predicted", cell_width=2.0)  # fmt: skip
