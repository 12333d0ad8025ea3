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

    Exit 1 if a check fails. (The full exactly-once Spark pipeline demo is `make demo`.)
    """
    from rich.console import Console

    from onceflow.demo import print_summary, run_demo

    console = Console()
    with console.status("starting a broker, producing and consuming..."):
        result = run_demo(data_dir, records=records, partitions=partitions)
    print_summary(result, console, data_dir)
    if not result.ok:
        raise SystemExit(1)
