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

    from onceflow.chaos.cells import CellResult
    from onceflow.chaos.harness import Engine
    from onceflow.chaos.matrix import ChaosMatrix
    from onceflow.chaos.scenarios import Cell, Scenario

FAMILIES = ("article", "runner", "relay", "spark", "fault")
ENGINES = ("onceflow", "apache-kafka")


@click.command("chaos")
@click.option(
    "--quick",
    is_flag=True,
    help="A representative subset (27 cells, about 3 minutes; on apache-kafka 29 with "
    "every failover cell, about 10 minutes).",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="onceflow (default): an embedded broker for the run. apache-kafka: a 3-node "
    "Apache Kafka cluster started from the launcher (onceflow docs kafka-cluster), topics with "
    "replication factor 3 and min.insync.replicas=2; adds the failover cells "
    "(fault/leader_kill, txn_coordinator_kill, group_coordinator_kill, two_nodes_down) "
    "and skips the cells aimed at onceflow's own broker (fault/broker_kill, network_cut, "
    "disk_full, power_loss: they kill, proxy, limit or cut the files of the broker process "
    "they start). Results go to PREFIX-apache-kafka.json/.md/.png and a section of PREFIX.md "
    "if it exists.",
)
@click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT",
    help="Run on this running Kafka cluster instead (implies --engine apache-kafka); its "
    "nodes are not ours to kill, so the failover cells are skipped.",
)
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
    engine: str | None,
    bootstrap: str | None,
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
    the prediction and exits 1 if any cell differs from it. With --engine apache-kafka, the
    same on a 3-node Apache Kafka cluster, plus failovers: the partition leader's, the
    transaction coordinator's or the group coordinator's node SIGKILLed mid-transaction,
    and two of three nodes down (acks=all must then acknowledge nothing).
    """
    from rich.console import Console

    from onceflow.chaos.harness import Engine, runnable
    from onceflow.chaos.scenarios import APACHE_KAFKA, ONCEFLOW, select

    console = Console()
    if bootstrap and engine == ONCEFLOW:
        raise click.UsageError("--bootstrap is a Kafka cluster's: use it without --engine onceflow")
    chosen = Engine(APACHE_KAFKA if bootstrap else engine or ONCEFLOW, bootstrap=bootstrap)
    cells = select(quick, patterns, families, engine=chosen.name)
    if len(runnable(chosen, cells)) < len(cells):
        console.print("[yellow]skipping the failover cells: the nodes at --bootstrap are not "
                      "ours to kill[/yellow]")  # fmt: skip
        cells = runnable(chosen, cells)
    if any(scenario.family == "spark" for scenario, _ in cells):
        from onceflow.chaos.spark_job import unavailable

        reason = unavailable()
        if reason is not None:
            console.print(f"[yellow]skipping the Spark cells: {reason}[/yellow]")
            cells = [(scenario, cell) for scenario, cell in cells if scenario.family != "spark"]
    if list_only:
        for scenario, cell in cells:
            click.echo(f"{scenario.name:56s} {cell.step:38s} {cell.fault}")
        return
    if redraw is not None:
        from onceflow.chaos.matrix import load

        matrix = load(redraw)
    else:
        if not cells:
            raise click.UsageError("no cell matches the given --pattern/--family")
        matrix = _run(console, cells, database_url, jobs, work_dir, quick, chosen)
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
    engine: Engine,
) -> ChaosMatrix:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from onceflow.chaos.harness import run_matrix

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
                            on_result=on_result, engine=engine)  # fmt: skip
    matrix.quick = quick
    matrix.seconds = time.monotonic() - started
    if matrix.ok and not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        console.print(f"cells' logs and databases kept in {work}")
    return matrix


def _save(console: Console, matrix: ChaosMatrix, out_prefix: str) -> None:
    from onceflow.chaos.heatmap import NO_MATPLOTLIB, draw
    from onceflow.chaos.matrix import cluster_section, section_of, with_section
    from onceflow.chaos.scenarios import ONCEFLOW

    prefix = Path(out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    main_md = prefix.with_name(prefix.name + ".md")
    if matrix.engine != ONCEFLOW:
        prefix = prefix.with_name(f"{prefix.name}-{matrix.engine}")
    json_path = prefix.with_name(prefix.name + ".json")
    png_path = prefix.with_name(prefix.name + ".png")
    md_path = prefix.with_name(prefix.name + ".md")
    json_path.write_text(matrix.to_json() + "\n")
    drawn = draw(matrix, png_path)
    image = drawn.name if drawn else None
    kept = section_of(main_md.read_text()) if main_md.exists() else None
    markdown = matrix.to_markdown(image=image)
    if matrix.engine == ONCEFLOW:  # keeps the cluster's section of an earlier run
        markdown = with_section(markdown, kept)
    md_path.write_text(markdown + "\n")
    saved = [json_path, md_path, drawn]
    if matrix.engine != ONCEFLOW and main_md.exists():
        main_md.write_text(with_section(main_md.read_text(), cluster_section(matrix, image)))
        saved.append(main_md)
    matrix.render(console)
    verdict = "[green]every cell as predicted[/green]" if matrix.ok else (
        f"[bold red]{len(matrix.mismatches)} cell(s) differ from the prediction[/bold red]"
    )  # fmt: skip
    if drawn is None:
        console.print(NO_MATPLOTLIB, markup=False)
    console.print(f"{verdict}; saved {', '.join(str(p) for p in saved if p is not None)}")
