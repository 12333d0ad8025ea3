"""``onceflow verify``: audit outputs against an input topic; non-zero exit on anomalies."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.sources import SourceError, read_input, read_output_topic, read_table

EXIT_ANOMALIES = 1
EXIT_ERROR = 2


def run_verify(
    bootstrap: str,
    input_topic: str,
    *,
    id_field: str,
    key_field: str | None = None,
    output_topic: str | None = None,
    database_url: str | None = None,
    table: str | None = None,
    query: str | None = None,
    order_by: str | None = None,
    output_id_field: str | None = None,
    output_key_field: str | None = None,
    abort_marker: str | None = None,
    timeout: float = 60.0,
) -> AuditReport:
    """Read the input and every output, then audit (the library entry point for chaos)."""
    if output_topic is None and database_url is None:
        raise SourceError("nothing to verify: give an output topic and/or a database")
    if database_url is not None and (table is None) == (query is None):
        raise SourceError("with a database give exactly one of a table or a query")
    extractor = Extractor(id_field, key_field)
    out_extractor = Extractor(output_id_field or id_field, output_key_field or key_field)
    source = read_input(bootstrap, input_topic, extractor, timeout)
    sinks = []
    if database_url is not None:
        sinks.append(
            read_table(database_url, out_extractor, table=table, query=query, order_by=order_by)
        )
    if output_topic is not None:
        sinks.append(
            read_output_topic(
                bootstrap, output_topic, out_extractor, abort_marker=abort_marker, timeout=timeout
            )
        )
    context = {
        "bootstrap": bootstrap,
        "input_topic": input_topic,
        "output_topic": output_topic,
        "table": table,
        "query": query,
        "id_field": id_field,
        "key_field": key_field,
        "input_end_offsets": {str(p): r.stable for p, r in sorted(source.ranges.items())},
        "order_checked": {sink.name: sink.check_order for sink in sinks},
    }
    return source.audit(sinks, context)


@click.command("verify")
@click.option("--bootstrap", required=True, metavar="HOST:PORT", help="Broker address.")
@click.option("--input", "input_topic", required=True, metavar="TOPIC", help="Input topic.")
@click.option("--output-topic", metavar="TOPIC", help="Output topic (read_committed).")
@click.option("--database-url", metavar="URL", help="sqlite:///PATH or postgresql://...")
@click.option("--table", metavar="TABLE", help="Table holding one row per processed event.")
@click.option("--query", metavar="SQL", help="Query returning the output rows (in order).")
@click.option("--order-by", metavar="COLUMN", help="Column giving the table's row order.")
@click.option("--id-field", required=True, help="Event id: JSON value field, key:, key:FIELD.")
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the machine-readable report here ('-' for stdout).",
)
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to read each topic.")
def verify_command(
    bootstrap: str,
    input_topic: str,
    output_topic: str | None,
    database_url: str | None,
    table: str | None,
    query: str | None,
    order_by: str | None,
    id_field: str,
    key_field: str | None,
    output_id_field: str | None,
    output_key_field: str | None,
    abort_marker: str | None,
    json_path: Path | None,
    timeout: float,
) -> None:
    """Audit outputs against the input topic: missing, duplicated, reordered per key,
    aborted data visible. Exits 1 on any anomaly, 2 when the sources cannot be read."""
    try:
        report = run_verify(
            bootstrap,
            input_topic,
            id_field=id_field,
            key_field=key_field,
            output_topic=output_topic,
            database_url=database_url,
            table=table,
            query=query,
            order_by=order_by,
            output_id_field=output_id_field,
            output_key_field=output_key_field,
            abort_marker=abort_marker,
            timeout=timeout,
        )
    except (SourceError, ValueError) as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(EXIT_ERROR)
    to_stdout = json_path is not None and str(json_path) == "-"
    if to_stdout:
        click.echo(report.to_json())
    else:
        from rich.console import Console

        report.render(Console(width=160))
        if json_path is not None:
            json_path.write_text(report.to_json() + "\n")
    sys.exit(0 if report.ok else EXIT_ANOMALIES)
