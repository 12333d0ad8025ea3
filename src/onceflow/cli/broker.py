"""``onceflow broker``: run the embedded Kafka-compatible broker."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click

from onceflow.cli.options import parse_key_values
from onceflow.protocol.errors import KafkaError


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
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
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
    "--log-level",
    default="WARNING",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def broker(
    data_dir: Path,
    host: str,
    port: int,
    advertised_host: str | None,
    configs: tuple[str, ...],
    log_level: str,
) -> None:
    """Run the embedded Kafka-compatible broker until SIGTERM or SIGINT.

    Prints one line `ready HOST:PORT` on stdout once it accepts connections.
    """
    from onceflow.broker.broker import Broker
    from onceflow.config import BrokerConfig

    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = BrokerConfig.from_strings(parse_key_values(configs, "--config"))
    except KafkaError as error:
        raise click.UsageError(str(error)) from None

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await Broker(data_dir, host, port, config, advertised_host).serve_forever(stop)

    try:
        asyncio.run(run())
    except OSError as error:
        raise click.ClickException(f"cannot start broker: {error}") from None
