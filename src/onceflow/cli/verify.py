"""``onceflow verify``: audit outputs against input topics; exit 1 on anomalies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from onceflow.cli.options import (
    EXIT_FOUND,
    EXIT_NOT_AUTHORIZED,
    EXIT_UNAVAILABLE,
    ClientSettings,
    cluster_options,
)


@click.command("verify")
@cluster_options
@click.option(
    "--input",
    "input_topics",
    required=True,
    multiple=True,
    metavar="TOPIC",
    help="Input topic; repeatable; a value starting with ^ is a regular expression "
    "(as in subscribe()).",
)
@click.option("--output-topic", metavar="TOPIC", help="Output topic (read_committed).")
@click.option("--database-url", metavar="URL", help="sqlite:///PATH or postgresql://...")
@click.option("--table", metavar="TABLE", help="Table holding one row per processed event.")
@click.option("--query", metavar="SQL", help="Query returning the output rows (in order).")
@click.option("--order-by", metavar="COLUMN", help="Column giving the table's row order.")
@click.option(
    "--dlq",
    "dead_letter_topic",
    metavar="TOPIC",
    help="Dead-letter topic: events found there are accounted for, and reported "
    "as dead-lettered instead of missing.",
)
@click.option(
    "--id-field",
    required=True,
    help="Where the event id is: a field of the JSON value (order_id, payload.order_id), "
    "key: (the whole key), key:FIELD (a field of a JSON key); in a table, a column.",
)
@click.option("--key-field", help="Ordering key (same syntax); order is checked per key.")
@click.option("--output-id-field", help="Event id in the outputs (default: --id-field).")
@click.option("--output-key-field", help="Key in the outputs (default: --key-field).")
@click.option(
    "--abort-marker",
    metavar="FIELD",
    help="Output records whose FIELD is truthy were written by aborted transactions.",
)
@click.option(
    "--json",
    "json_path",
    is_flag=False,
    flag_value="-",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Print the machine-readable report on stdout (--json) or write it to a file "
    "(--json PATH).",
)
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to read each topic.")
def verify_command(
    client: ClientSettings,
    input_topics: tuple[str, ...],
    json_path: Path | None,
    **audit: Any,
) -> None:
    """Audit outputs against the input topics: missing, duplicated, reordered per key,
    aborted data visible.

    Exit 0 when clean, 1 on any anomaly or an unknown topic, 2 when a source cannot be
    read (unreachable cluster, a database that cannot be opened, an --id-field no input
    record has, a column the table lacks), 3 when the principal may not read a topic.
    Input records that repeat an id are counted and said in words: each output is
    expected to hold each id once.
    """
    from onceflow.verify.run import run_verify
    from onceflow.verify.sources import SourceError, SourceNotAuthorized, SourceNotFound

    client.session().check()  # an unreachable cluster: one line and exit 2, at once
    try:
        # The other options are run_verify's keyword arguments, under the same names.
        report = run_verify(client.conf, input_topics, **audit)
    except (SourceError, ValueError) as error:
        click.echo(f"error: {error}", err=True)
        if isinstance(error, SourceNotFound):
            raise SystemExit(EXIT_FOUND) from None
        if isinstance(error, SourceNotAuthorized):
            raise SystemExit(EXIT_NOT_AUTHORIZED) from None
        raise SystemExit(EXIT_UNAVAILABLE) from None
    if json_path is not None and str(json_path) == "-":
        click.echo(report.to_json())
    else:
        from onceflow.cli.output import console

        report.render(console())
        if json_path is not None:
            json_path.write_text(report.to_json() + "\n")
    raise SystemExit(0 if report.ok else EXIT_FOUND)
