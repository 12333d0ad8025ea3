"""``onceflow transactions``: list, describe, producers, find-hanging, abort."""

from __future__ import annotations

import click

from onceflow.admin.errors import NotFound
from onceflow.cli.options import ClientSettings, cluster_options, json_option
from onceflow.cli.output import print_json, print_rows, print_table
from onceflow.clock import now_ms


@click.group("transactions")
def transactions_command() -> None:
    """Transactions: list, describe, active producers, find and abort hanging ones.

    The semantics of Kafka's kafka-transactions tool; works against onceflow's broker and
    any Kafka cluster.
    """


@transactions_command.command("list")
@cluster_options
@json_option
@click.option(
    "--state",
    "states",
    multiple=True,
    help="Only transactions in this state (Ongoing, PrepareCommit, ...). Repeatable.",
)
def list_command(client: ClientSettings, as_json: bool, states: tuple[str, ...]) -> None:
    """List transactional ids with their producer id, state and coordinator.

    Exit 3 if the principal may not describe the cluster and sees none at all.
    """
    from onceflow.admin.transactions import list_transactions

    session = client.session()
    rows = list_transactions(session, states)
    if not rows:
        session.require_visibility("list transactions")
    print_rows(
        rows,
        as_json,
        ("transactional.id", "producer id", "state", "coordinator"),
        lambda r: (r.transactional_id, r.producer_id, r.state, r.coordinator),
    )


@transactions_command.command("describe")
@cluster_options
@json_option
@click.argument("transactional_ids", nargs=-1, required=True)
def describe_command(
    client: ClientSettings, as_json: bool, transactional_ids: tuple[str, ...]
) -> None:
    """Show state, epoch, timeout and partitions of transactional ids.

    Exit 1 if any of them is unknown (the known ones are shown first; nothing but the
    error if none is known).
    """
    from onceflow.admin.transactions import describe_transactions

    found = describe_transactions(client.session(), list(transactional_ids))
    missing = [t for t in transactional_ids if t not in found]
    if missing and not found:  # nothing to show: the error alone
        raise NotFound(f"transactional id not found: {', '.join(missing)}")
    now = now_ms()
    if as_json:
        print_json([found[t] for t in transactional_ids if t in found])
    else:
        rows = []
        for d in (found[t] for t in transactional_ids if t in found):
            open_for = d.open_for_ms(now)
            rows.append(
                (
                    d.transactional_id,
                    d.state,
                    d.producer_id,
                    d.producer_epoch,
                    d.timeout_ms,
                    None if open_for is None else f"{open_for / 1000:.1f}s",
                    ", ".join(f"{t}-{p}" for t, p in d.partitions),
                )
            )
        print_table(
            (
                "transactional.id",
                "state",
                "producer id",
                "epoch",
                "timeout ms",
                "open for",
                "partitions",
            ),
            rows,
        )
    if missing:
        raise NotFound(f"transactional id not found: {', '.join(missing)}")


@transactions_command.command("producers")
@cluster_options
@json_option
@click.argument("topic")
@click.option(
    "--partition", "partitions", type=int, multiple=True, help="Only this partition. Repeatable."
)
def producers_command(
    client: ClientSettings, as_json: bool, topic: str, partitions: tuple[int, ...]
) -> None:
    """Active producers per partition of TOPIC, like kafka-transactions describe-producers.

    A producer with an open transaction (txn start offset >= 0) holds the last stable
    offset back: read_committed consumers wait until it commits, aborts or times out.
    Status `hanging` marks an open transaction its coordinator does not know about (see
    find-hanging, which also waits out the longest legal transaction timeout).
    """
    from onceflow.admin.transactions import describe_producers, list_transactions

    session = client.session()
    rows = describe_producers(session, topic, list(partitions) or None)
    ongoing = {t.producer_id for t in list_transactions(session) if t.state == "Ongoing"}

    def status(producer_id: int, start: int) -> str:
        if start < 0:
            return ""
        return "open" if producer_id in ongoing else "hanging"

    if as_json:
        print_json(
            [{**r.to_dict(), "status": status(r.producer_id, r.txn_start_offset)} for r in rows]
        )
        return
    print_table(
        (
            "partition",
            "producer id",
            "epoch",
            "coordinator epoch",
            "last sequence",
            "last timestamp",
            "txn start offset",
            "status",
        ),
        [
            (
                r.partition,
                r.producer_id,
                r.producer_epoch,
                r.coordinator_epoch,
                r.last_sequence,
                r.last_timestamp,
                r.txn_start_offset,
                status(r.producer_id, r.txn_start_offset),
            )
            for r in rows
        ],
    )


@transactions_command.command("find-hanging")
@cluster_options
@json_option
@click.option("--topic", default=None, help="Search this topic's partitions.")
@click.option("--partition", type=int, default=None, help="Only this partition (needs --topic).")
@click.option(
    "--broker-id",
    type=int,
    default=None,
    help="Search the partitions this broker holds a replica of.",
)
@click.option(
    "--max-transaction-timeout",
    type=click.IntRange(min=0),
    default=15,
    show_default=True,
    metavar="MINUTES",
    help="Only transactions whose last write is older than this (the longest "
    "transaction.timeout.ms any producer may use).",
)
def find_hanging_command(
    client: ClientSettings,
    as_json: bool,
    topic: str | None,
    partition: int | None,
    broker_id: int | None,
    max_transaction_timeout: int,
) -> None:
    """Find open transactions no coordinator will finish, like kafka-transactions find-hanging.

    Exits 0 whether or not it finds some (they are the output); abort each with
    `onceflow transactions abort --topic T --partition P --start-offset O`. Open
    transactions it does not list are named on stderr with the reason: a live one (its
    coordinator knows it and aborts it when its transaction.timeout.ms runs out, at the
    time shown; a SIGKILLed producer's transaction is such a one) or one written to more
    recently than --max-transaction-timeout. Never abort those by hand.
    """
    from onceflow.admin.transactions import find_open_transactions

    try:
        found = find_open_transactions(
            client.session(),
            topic=topic,
            partition=partition,
            broker_id=broker_id,
            max_transaction_timeout_min=max_transaction_timeout,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    now = now_ms()
    for state, reason in found.not_hanging:
        click.echo(
            f"not hanging: {state.topic}:{state.partition} producer {state.producer_id} "
            f"from offset {state.txn_start_offset}: {reason}",
            err=True,
        )
    print_rows(
        found.hanging,
        as_json,
        (
            "topic",
            "partition",
            "producer id",
            "epoch",
            "coordinator epoch",
            "start offset",
            "last timestamp",
            "duration (min)",
        ),
        lambda r: (
            r.topic,
            r.partition,
            r.producer_id,
            r.producer_epoch,
            r.coordinator_epoch,
            r.txn_start_offset,
            r.last_timestamp,
            (now - r.last_timestamp) // 60_000,
        ),
    )


@transactions_command.command("abort")
@cluster_options
@click.option("--topic", required=True, help="Topic of the open transaction.")
@click.option("--partition", type=int, required=True, help="Partition of the open transaction.")
@click.option(
    "--start-offset",
    type=int,
    default=None,
    help="Offset where the transaction to abort starts (find-hanging shows it).",
)
@click.option("--producer-id", type=int, default=None, help="Without --start-offset: the producer.")
@click.option("--producer-epoch", type=int, default=None, help="... its epoch.")
@click.option("--coordinator-epoch", type=int, default=None, help="... its coordinator epoch.")
def abort_command(
    client: ClientSettings,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> None:
    """Abort a hanging transaction on one partition, like kafka-transactions abort.

    Writes an abort marker (WriteTxnMarkers) for the transaction's producer, so the last
    stable offset moves on and read_committed consumers read past it. Only for hanging
    transactions: a live one is finished by its producer or its coordinator's timeout.
    """
    from onceflow.admin.transactions import abort_transaction

    try:
        found = abort_transaction(
            client.session(),
            topic,
            partition,
            start_offset=start_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    pid = found.producer_id if found is not None else producer_id
    click.echo(f"aborted the transaction of producer {pid} on {topic}:{partition}")
