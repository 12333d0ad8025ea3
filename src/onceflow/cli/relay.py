"""``onceflow relay``: publish a transactional outbox to Kafka."""

from __future__ import annotations

import signal
import threading

import click

from onceflow.cli.options import ClientSettings, cluster_options
from onceflow.patterns.outbox import DEFAULT_SHARDS, DEFAULT_TABLE


@click.command("relay")
@click.option("--database-url", required=True, help="sqlite:///PATH or postgresql://...")
@cluster_options(log_level="INFO")
@click.option("--table", default=DEFAULT_TABLE, show_default=True, help="Outbox table.")
@click.option("--shards", default=DEFAULT_SHARDS, show_default=True,
              help="Key shards (must match the writers' Outbox(shards=...)).")  # fmt: skip
@click.option("--batch-size", default=500, show_default=True,
              help="Rows one cycle reads, publishes and marks published at most.")  # fmt: skip
@click.option("--shards-per-cycle", default=4, show_default=True,
              help="PostgreSQL: shards one relay locks per cycle (SKIP LOCKED).")  # fmt: skip
@click.option("--lease-ttl-ms", default=15_000, show_default=True,
              help="SQLite: single-writer lease duration.")  # fmt: skip
@click.option("--transactional-id", default=None,
              help="Publish each batch in a Kafka transaction with this id.")  # fmt: skip
@click.option("--idle-exit", type=float, default=None,
              help="Exit after this many seconds with nothing published, once the outbox"
                   " is empty (default: run until SIGTERM).")  # fmt: skip
def relay_command(
    database_url: str,
    client: ClientSettings,
    table: str,
    shards: int,
    batch_size: int,
    shards_per_cycle: int,
    lease_ttl_ms: int,
    transactional_id: str | None,
    idle_exit: float | None,
) -> None:
    """Publish outbox rows with an idempotent producer and mark them published.

    Safe to run as several processes (PostgreSQL: FOR UPDATE SKIP LOCKED on key shards;
    SQLite: one lease holder at a time). Per-key order is kept; a crash re-publishes the
    unmarked rows (duplicates carry the same onceflow-outbox-id header for an inbox).
    Exit 2 if the database or the configuration is unusable.
    """
    from onceflow.configuration_error import ConfigurationError
    from onceflow.crash_points import CrashPoints
    from onceflow.db import DatabaseError, connect
    from onceflow.patterns.outbox import Outbox
    from onceflow.patterns.relay import Relay, RelayConfig

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        db = connect(database_url, lock_timeout_ms=min(lease_ttl_ms // 2, 10_000))
        outbox = Outbox(db, table, shards)
        outbox.create_schema()
        config = RelayConfig(
            client.bootstrap,
            batch_size=batch_size,
            shards_per_cycle=shards_per_cycle,
            lease_ttl_ms=lease_ttl_ms,
            transactional_id=transactional_id,
            producer_config=client.extra,
        )
        relay = Relay(db, outbox, config, CrashPoints.from_env())
        published = relay.run(stop.is_set, idle_exit_s=idle_exit)
    except (ConfigurationError, DatabaseError) as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(2) from None
    click.echo(f"published {published}")
