"""A fault run's results as a PNG heat map: rows of cells, each coloured by what the audit
found, with a thick black frame on the cells to look at. The chaos matrix (one row per
pattern, one cell per step) and ``onceflow prove`` (one row per trial, one cell per fault)
both draw through ``draw_grid``. It needs matplotlib, the ``onceflow[chaos]`` extra; without
it nothing is drawn (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

COLOURS = {
    "ok": "#4caf50",
    "duplicated": "#ff9800",
    "lost": "#e53935",
    "lost+duplicated": "#8e0000",
    "error": "#9e9e9e",
    "other": "#8e24aa",
}
NO_MATPLOTLIB = "heat map skipped: matplotlib is not installed (pip install 'onceflow[chaos]')"


@dataclass(frozen=True, slots=True)
class GridCell:
    text: str
    outcome: str  # a key of COLOURS
    framed: bool = False


@dataclass(frozen=True, slots=True)
class GridRow:
    title: str
    cells: list[GridCell]


def colour(outcome: str) -> str:
    return COLOURS.get(outcome, COLOURS["other"])


def draw_grid(
    rows: list[GridRow], title: str, path: Path, legend: tuple[str, ...], framed_label: str,
    cell_width: float = 1.6,
) -> Path | None:  # fmt: skip
    """The grid as a PNG at ``path``; None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    columns = max([len(row.cells) for row in rows] + [1])
    figure, axes = plt.subplots(figsize=(cell_width * columns + 4.0, 0.8 * len(rows) + 1.6))
    for number, row in enumerate(rows):
        y = len(rows) - 1 - number
        for column, cell in enumerate(row.cells):
            axes.add_patch(Rectangle(
                (column, y), 0.96, 0.9, facecolor=colour(cell.outcome),
                edgecolor="black" if cell.framed else "white",
                linewidth=3 if cell.framed else 0.5,
            ))  # fmt: skip
            axes.text(column + 0.48, y + 0.45, cell.text, ha="center", va="center", fontsize=6.5)
        axes.text(-0.1, y + 0.45, row.title, ha="right", va="center", fontsize=8)
    axes.set_xlim(-0.05, columns)
    axes.set_ylim(0, len(rows))
    axes.axis("off")
    axes.set_title(title, fontsize=9)
    handles = [Patch(color=COLOURS[k], label=k) for k in legend]
    handles.append(Patch(facecolor="white", edgecolor="black", linewidth=3, label=framed_label))
    axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.01),
                ncol=len(handles), fontsize=7, frameon=False)  # fmt: skip
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
