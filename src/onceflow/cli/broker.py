"""``onceflow broker``: run the embedded Kafka-compatible broker."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click

from onceflow.cli.options import log_level_option, parse_key_values, setup_logging
from onceflow.protocol.errors import KafkaError

EXIT_CANNOT_START = 1  # the port is taken, another broker holds the data directory, ...


def _list_apis(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from onceflow.broker.apis import markdown_table

    click.echo(markdown_table())
    ctx.exit()


@click.command("broker")
@click.option(
    "--list-apis",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_list_apis,
    help="Print the Kafka APIs and versions this broker serves (Markdown) and exit.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory holding the topic logs and coordinator state.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (shorthand for one PLAINTEXT listener; see --config listeners).",
)
@click.option(
    "--port",
    default=9092,
    show_default=True,
    type=int,
    help="Port to listen on; 0 picks a free port (the ready line tells which).",
)
@click.option(
    "--advertised-host",
    default=None,
    help="Host name given to clients in metadata (default: --host).",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Broker configuration, named as in Kafka (e.g. num.partitions=3, "
    "log.flush.policy=always|interval|os). Repeatable.",
)
@click.option(
    "--add-scram",
    "scram_users",
    multiple=True,
    metavar="'SCRAM-SHA-256=[name=NAME,password=PASSWORD]'",
    help="Store a SCRAM credential at start-up (as kafka-storage format --add-scram; "
    "iterations=N optional). Repeatable.",
)
@log_level_option()
@click.pass_context
def broker(
    ctx: click.Context,
    data_dir: Path,
    host: str,
    port: int,
    advertised_host: str | None,
    configs: tuple[str, ...],
    scram_users: tuple[str, ...],
    log_level: str,
) -> None:
    """Run the embedded Kafka-compatible broker until SIGTERM or SIGINT.

    Prints one line `ready HOST:PORT` on stdout once it accepts connections; with
    `--config listeners=...` (e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093)
    the line is `ready NAME://HOST:PORT,...` with every listener. Security settings
    (TLS, SASL, ACLs): onceflow docs security; the broker's promises: onceflow docs broker;
    Prometheus metrics by Kafka's names (--config metrics.port=9308): onceflow docs metrics.

    Exit 0 after a clean shutdown, 1 if it cannot start (the port is taken, another
    broker holds --data-dir), 2 for a setting it cannot use.
    """
    from onceflow.broker.broker import Broker
    from onceflow.broker.security.settings import (
        SecuritySettingError,
        configured_listeners,
        needs,
        parse_add_scram,
        server_tls_context,
    )
    from onceflow.config import BrokerConfig
    from onceflow.log.dir_lock import DataDirInUse

    setup_logging(log_level)
    try:
        config = BrokerConfig.from_strings(parse_key_values(configs, "--config"))
        users = [parse_add_scram(text) for text in scram_users]
    except (KafkaError, SecuritySettingError) as error:
        raise click.UsageError(str(error)) from None
    explicit = [
        f"--{name}"
        for name in ("host", "port")
        if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT
    ]
    if config["listeners"] and explicit:
        raise click.UsageError(f"give either {' and '.join(explicit)} or listeners, not both")
    try:
        listeners = configured_listeners(config, host, port, advertised_host)
        if needs(listeners, "uses_tls"):  # a key, certificate or password it cannot use
            server_tls_context(config)
    except SecuritySettingError as error:
        raise click.UsageError(str(error)) from None

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        server = Broker(data_dir, host, port, config, advertised_host, users)
        await server.serve_forever(stop)

    try:
        asyncio.run(run())
    except (SecuritySettingError, DataDirInUse, OSError) as error:
        click.echo(f"error: cannot start broker: {error}", err=True)
        raise SystemExit(EXIT_CANNOT_START) from None
