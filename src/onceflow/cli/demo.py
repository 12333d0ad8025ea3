"""``onceflow demo``: a broker, an idempotent producer and a consumer, checked, in seconds."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".demo/broker"),
    show_default=True,
    help="Broker data directory (kept between runs).",
)
@click.option("--records", default=3000, show_default=True, help="Records to produce.")
@click.option("--partitions", default=3, show_default=True, help="Partitions of the topic.")
def demo_command(data_dir: Path, records: int, partitions: int) -> None:
    """Quick broker demo: idempotent producer, embedded broker, consumer, order checks.

    Starts a broker on --data-dir, produces --records keyed records with an idempotent
    producer, consumes them and checks that none is missing and that each key kept its
    order and its partition. Exit 1 if a check fails. The exactly-once pipelines
    themselves: onceflow docs patterns (Python) and onceflow docs spark (PySpark).
    """
    from rich.console import Console

    from onceflow.demo import print_summary, run_demo

    console = Console()
    with console.status("starting a broker, producing and consuming..."):
        result = run_demo(data_dir, records=records, partitions=partitions)
    print_summary(result, console, data_dir)
    if not result.ok:
        raise SystemExit(1)
