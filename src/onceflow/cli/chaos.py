"""``onceflow chaos``: run the chaos matrix and save it as JSON, Markdown and a PNG heat map."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the command's heavy parts load only when it runs
    from rich.console import Console

    from onceflow.verify.chaos.cells import CellResult
    from onceflow.verify.chaos.matrix import ChaosMatrix
    from onceflow.verify.chaos.scenarios import Cell, Scenario

FAMILIES = ("article", "runner", "relay", "spark", "fault")


@click.command("chaos")
@click.option("--quick", is_flag=True, help="A representative subset (27 cells, about 3 minutes).")
@click.option(
    "--pattern",
    "patterns",
    multiple=True,
    metavar="NAME",
    help="Only this pattern (e.g. article/no_dedup or db_offsets). Repeatable.",
)
@click.option(
    "--family",
    "families",
    multiple=True,
    type=click.Choice(FAMILIES),
    help="Only this family of rows. Repeatable.",
)
@click.option(
    "--database-url",
    default=None,
    metavar="URL",
    help="A PostgreSQL server (postgresql://...): one database per cell is created "
    "there. Default: a SQLite file per cell.",
)
@click.option(
    "--jobs",
    default=2,
    show_default=True,
    type=click.IntRange(1, 16),
    help="Cells run side by side.",
)
@click.option(
    "--out",
    "out_prefix",
    default="chaos-matrix",
    show_default=True,
    metavar="PREFIX",
    help="Writes PREFIX.json, PREFIX.md and PREFIX.png.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where cells keep their broker, databases and logs (default: a temporary "
    "directory, deleted unless a cell differs from its prediction).",
)
@click.option("--list", "list_only", is_flag=True, help="List the cells and exit.")
@click.option(
    "--redraw",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="JSON",
    help="Redraw PREFIX.md and PREFIX.png from a saved JSON run.",
)
def chaos_command(
    quick: bool,
    patterns: tuple[str, ...],
    families: tuple[str, ...],
    database_url: str | None,
    jobs: int,
    out_prefix: str,
    work_dir: Path | None,
    list_only: bool,
    redraw: str | None,
) -> None:  # fmt: skip
    """Kill processes at every step of every exactly-once pattern, then audit the outputs.

    For each pattern of the seed articles (no deduplication, idempotent consumer,
    transactional outbox, Kafka transactions, their combinations, offsets in the
    database), onceflow's own Runner patterns, the outbox relay and the Spark sinks, and
    for each step of its flow: run the worker on a real broker, SIGKILL it right after
    that step, restart it, and audit every output (REST calls, database rows, output
    topic) with `onceflow verify`. Also a broker SIGKILL during a commit, the database
    unavailable for a while, a network cut, the broker's disk full for a while and a
    broker power loss (files cut back to their last fsync). Prints the matrix next to
    the prediction and exits 1 if any cell differs from it.
    """
    from rich.console import Console

    from onceflow.verify.chaos.scenarios import select

    console = Console()
    cells = select(quick, patterns, families)
    if any(scenario.family == "spark" for scenario, _ in cells):
        from onceflow.verify.chaos.spark_job import unavailable

        reason = unavailable()
        if reason is not None:
            console.print(f"[yellow]skipping the Spark cells: {reason}[/yellow]")
            cells = [(scenario, cell) for scenario, cell in cells if scenario.family != "spark"]
    if list_only:
        for scenario, cell in cells:
            click.echo(f"{scenario.name:56s} {cell.step:38s} {cell.fault}")
        return
    if redraw is not None:
        from onceflow.verify.chaos.matrix import load

        matrix = load(redraw)
    else:
        if not cells:
            raise click.UsageError("no cell matches the given --pattern/--family")
        matrix = _run(console, cells, database_url, jobs, work_dir, quick)
        matrix.command = " ".join(["onceflow", *sys.argv[1:]])
    _save(console, matrix, out_prefix)
    if not matrix.ok:
        raise SystemExit(1)


def _run(
    console: Console,
    cells: Sequence[tuple[Scenario, Cell]],
    database_url: str | None,
    jobs: int,
    work_dir: Path | None,
    quick: bool,
) -> ChaosMatrix:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from onceflow.verify.chaos.harness import run_matrix

    keep = work_dir is not None
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="onceflow-chaos-"))
    started = time.monotonic()
    with Progress(
        "{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("chaos cells", total=len(cells))

        def on_result(result: CellResult) -> None:
            progress.advance(task)
            if not result.matches:
                progress.console.print(
                    f"[red]differs[/red] {result.scenario} {result.step}: "
                    f"{result.error or result.observed}"
                )

        matrix = run_matrix(cells, work, database_url=database_url, jobs=jobs,
                            on_result=on_result)  # fmt: skip
    matrix.quick = quick
    matrix.seconds = time.monotonic() - started
    if matrix.ok and not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        console.print(f"cells' logs and databases kept in {work}")
    return matrix


def _save(console: Console, matrix: ChaosMatrix, out_prefix: str) -> None:
    from onceflow.verify.chaos.heatmap import NO_MATPLOTLIB, draw

    prefix = Path(out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    json_path = prefix.with_name(prefix.name + ".json")
    png_path = prefix.with_name(prefix.name + ".png")
    md_path = prefix.with_name(prefix.name + ".md")
    json_path.write_text(matrix.to_json() + "\n")
    drawn = draw(matrix, png_path)
    md_path.write_text(matrix.to_markdown(image=drawn.name if drawn else None) + "\n")
    matrix.render(console)
    verdict = "[green]every cell as predicted[/green]" if matrix.ok else (
        f"[bold red]{len(matrix.mismatches)} cell(s) differ from the prediction[/bold red]"
    )  # fmt: skip
    if drawn is None:
        console.print(NO_MATPLOTLIB, markup=False)
    saved = ", ".join(str(p) for p in (json_path, md_path, drawn) if p is not None)
    console.print(f"{verdict}; saved {saved}")
