"""``onceflow relay``: publish a transactional outbox to Kafka."""

from __future__ import annotations

import logging
import signal
import sys
import threading

import click

from onceflow.patterns.db import ConfigurationError, DatabaseError, connect
from onceflow.patterns.faults import CrashPoints
from onceflow.patterns.outbox import DEFAULT_SHARDS, DEFAULT_TABLE, Outbox
from onceflow.patterns.relay import Relay, RelayConfig


@click.command("relay")
@click.option("--database-url", required=True, help="sqlite:///PATH or postgresql://...")
@click.option("--bootstrap", required=True, metavar="HOST:PORT", help="Kafka bootstrap servers.")
@click.option("--table", default=DEFAULT_TABLE, show_default=True, help="Outbox table.")
@click.option("--shards", default=DEFAULT_SHARDS, show_default=True,
              help="Key shards (must match the writers' Outbox(shards=...)).")  # fmt: skip
@click.option("--batch-size", default=500, show_default=True)
@click.option("--shards-per-cycle", default=4, show_default=True,
              help="PostgreSQL: shards one relay locks per cycle (SKIP LOCKED).")  # fmt: skip
@click.option("--lease-ttl-ms", default=15_000, show_default=True,
              help="SQLite: single-writer lease duration.")  # fmt: skip
@click.option("--transactional-id", default=None,
              help="Publish each batch in a Kafka transaction with this id.")  # fmt: skip
@click.option("--idle-exit", type=float, default=None,
              help="Exit after this many idle seconds (default: run until SIGTERM).")  # fmt: skip
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def relay_command(
    database_url: str,
    bootstrap: str,
    table: str,
    shards: int,
    batch_size: int,
    shards_per_cycle: int,
    lease_ttl_ms: int,
    transactional_id: str | None,
    idle_exit: float | None,
    log_level: str,
) -> None:
    """Publish outbox rows with an idempotent producer and mark them published.

    Safe to run as several processes (PostgreSQL: FOR UPDATE SKIP LOCKED on key shards;
    SQLite: one lease holder at a time). Per-key order is kept; a crash re-publishes the
    unmarked rows (duplicates carry the same onceflow-outbox-id header for an inbox).
    """
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        db = connect(database_url, lock_timeout_ms=min(lease_ttl_ms // 2, 10_000))
        outbox = Outbox(db, table, shards)
        outbox.create_schema()
        config = RelayConfig(
            bootstrap,
            batch_size=batch_size,
            shards_per_cycle=shards_per_cycle,
            lease_ttl_ms=lease_ttl_ms,
            transactional_id=transactional_id,
        )
        relay = Relay(db, outbox, config, CrashPoints.from_env())
        published = relay.run(stop.is_set, idle_exit_s=idle_exit)
    except (ConfigurationError, DatabaseError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"published {published}")
