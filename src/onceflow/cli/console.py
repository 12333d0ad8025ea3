"""``onceflow console``: the web console (onceflow.console) for any cluster."""

from __future__ import annotations

import ipaddress
import secrets
import socket
from pathlib import Path

import click

from onceflow.admin.errors import Refused
from onceflow.cli.options import ClientSettings, cluster_options

TOKEN_ENV = "ONCEFLOW_CONSOLE_TOKEN"


@click.command("console")
@cluster_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to serve on; beyond loopback a token is required (see --token).",
)
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=int,
    help="Port to serve on; 0 picks a free one (the first line tells which).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Let the console change the cluster (reset offsets, abort hanging "
    "transactions, replay dead letters), as its principal; read-only without.",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    default=None,
    metavar="TOKEN",
    help=f"Every request must carry this token (${TOKEN_ENV}); made up and printed "
    "in the URL when --host is not a loopback address and none is given.",
)
@click.option(
    "--reports",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Folder of verify/chaos/prove reports to show.",
)
@click.option(
    "--dead-letter-topic",
    "dead_letter_topics",
    multiple=True,
    metavar="TOPIC",
    help="A dead-letter topic not named like one (*.dlq, *-dlt, ...). Repeatable.",
)
@click.option(
    "--max-transaction-timeout",
    default=15,
    show_default=True,
    type=int,
    metavar="MINUTES",
    help="A transaction left open longer on a partition no coordinator counts "
    "is hanging (as kafka-transactions find-hanging).",
)
def console_command(
    client: ClientSettings,
    host: str,
    port: int,
    allow_writes: bool,
    token: str | None,
    reports: Path | None,
    dead_letter_topics: tuple[str, ...],
    max_transaction_timeout: int,
) -> None:
    """Serve a web console for the cluster until Ctrl-C.

    Pages: the cluster and its topics (each partition's log start, last stable offset and
    high watermark, the gap drawn), consumer groups (lag to the LSO and to the high
    watermark, the transaction a stuck read_committed consumer waits on, offset resets),
    transactions (open at coordinators with their age, and hanging ones with the
    partition they block, to abort), a record browser (control records and aborted
    batches marked, read_committed or read_uncommitted), dead-letter topics (the error of
    each record, replay to its source topic in one transaction), and reports. Works
    against onceflow's broker and Apache Kafka with the same -X / --command-config
    security as every command; a cluster that cannot be reached is said on the page.

    Needs the console extra: pip install 'onceflow[console]' (onceflow docs console).
    """
    try:
        import uvicorn

        from onceflow.console.app import ConsoleSettings, create_app
    except ImportError as missing:
        raise Refused(
            f"the console needs {missing.name}: pip install 'onceflow[console]'"
        ) from None
    if token is None and not _loopback(host):
        token = secrets.token_urlsafe(18)
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as error:
        raise Refused(f"cannot serve on {host}:{port}: {error.strerror}") from None
    listening.listen(128)  # connections queue from now on, before the first line
    bound = listening.getsockname()[1]
    settings = ConsoleSettings(
        client.session(),
        allow_writes=allow_writes,
        token=token,
        reports=reports,
        dead_letter_topics=dead_letter_topics,
        max_transaction_timeout_min=max_transaction_timeout,
    )
    url = f"http://{host}:{bound}/" + (f"?token={token}" if token else "")
    mode = "writes allowed" if allow_writes else "read-only"
    click.echo(f"console on {url} (cluster {client.bootstrap}, {mode})", err=False)
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[listening])


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
