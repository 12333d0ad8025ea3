"""``onceflow groups``: list consumer groups, describe one, show its offsets and lag.

Uses confluent-kafka's AdminClient, so it works against onceflow's broker and against any
Kafka cluster. confluent-kafka is imported only when a command runs (the CLI also starts
the broker, which does not need it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

TIMEOUT = 15.0


@dataclass
class OffsetRow:
    topic: str
    partition: int
    committed: int
    log_end: int | None
    metadata: str

    @property
    def lag(self) -> int | None:
        if self.log_end is None or self.committed < 0:
            return None
        return max(self.log_end - self.committed, 0)


def admin_client(bootstrap: str) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def kafka_exception() -> type[Exception]:
    from confluent_kafka import KafkaException

    return KafkaException


def list_groups(bootstrap: str) -> list[dict]:
    admin = admin_client(bootstrap)
    listing = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    ids = sorted(group.group_id for group in listing.valid)
    descriptions = {}
    if ids:
        futures = admin.describe_consumer_groups(ids, request_timeout=TIMEOUT)
        descriptions = {group_id: future.result(TIMEOUT) for group_id, future in futures.items()}
    rows = []
    for group in sorted(listing.valid, key=lambda g: g.group_id):
        description = descriptions.get(group.group_id)
        rows.append(
            {
                "group": group.group_id,
                "state": _name(group.state),
                "simple": group.is_simple_consumer_group,
                "members": len(description.members) if description else 0,
                "assignor": description.partition_assignor if description else "",
            }
        )
    return rows


def committed_offsets(bootstrap: str, group: str) -> list[OffsetRow]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = admin_client(bootstrap)
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)
    committed = result[group].result(TIMEOUT).topic_partitions or []
    committed = [tp for tp in committed if tp.error is None]
    log_ends: dict[tuple[str, int], int] = {}
    if committed:
        wanted = {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in committed}
        for tp, future in admin.list_offsets(wanted, request_timeout=TIMEOUT).items():
            try:
                log_ends[(tp.topic, tp.partition)] = future.result(TIMEOUT).offset
            except KafkaException:
                pass  # a deleted topic: no log end offset
    return sorted(
        (
            OffsetRow(
                tp.topic,
                tp.partition,
                tp.offset,
                log_ends.get((tp.topic, tp.partition)),
                tp.metadata or "",
            )
            for tp in committed
        ),
        key=lambda row: (row.topic, row.partition),
    )


def _name(state: object) -> str:
    name = getattr(state, "name", str(state))
    return {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.title().replace("_", ""))


@click.group("groups")
def groups_command() -> None:
    """Consumer groups: members, assignments, committed offsets and lag."""


@groups_command.command("list")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
def list_command(bootstrap: str) -> None:
    """List the consumer groups with their state, member count and assignor."""
    try:
        rows = list_groups(bootstrap)
    except kafka_exception() as error:
        raise click.ClickException(str(error)) from None
    table = Table("group", "state", "members", "assignor", "kind")
    for row in rows:
        table.add_row(
            row["group"],
            row["state"],
            str(row["members"]),
            row["assignor"] or "-",
            "simple" if row["simple"] else "consumer",
        )
    Console().print(table)


@groups_command.command("describe")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
@click.argument("group")
def describe_command(bootstrap: str, group: str) -> None:
    """Show a group's state, assignor, coordinator and each member's partitions."""
    try:
        admin = admin_client(bootstrap)  # keep it referenced until the future completes
        futures = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)
        description = futures[group].result(TIMEOUT)
    except kafka_exception() as error:
        raise click.ClickException(str(error)) from None
    console = Console()
    coordinator = description.coordinator
    console.print(
        f"group [bold]{group}[/bold]  state {_name(description.state)}  "
        f"assignor {description.partition_assignor or '-'}  "
        f"coordinator {coordinator.host}:{coordinator.port} (node {coordinator.id})"
        if coordinator
        else f"group [bold]{group}[/bold]  state {_name(description.state)}"
    )
    table = Table("member id", "client id", "host", "instance id", "partitions")
    for member in description.members:
        tps = member.assignment.topic_partitions if member.assignment else []
        by_topic: dict[str, list[int]] = {}
        for tp in tps or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = ", ".join(
            f"{topic}[{','.join(str(p) for p in sorted(parts))}]"
            for topic, parts in sorted(by_topic.items())
        )
        table.add_row(
            member.member_id,
            member.client_id,
            member.host,
            member.group_instance_id or "-",
            partitions or "-",
        )
    console.print(table)


@groups_command.command("offsets")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
@click.argument("group")
def offsets_command(bootstrap: str, group: str) -> None:
    """Committed offset, log end offset and lag for each partition the group committed."""
    try:
        rows = committed_offsets(bootstrap, group)
    except kafka_exception() as error:
        raise click.ClickException(str(error)) from None
    table = Table("topic", "partition", "committed", "log end", "lag", "metadata")
    for row in rows:
        table.add_row(
            row.topic,
            str(row.partition),
            str(row.committed),
            "-" if row.log_end is None else str(row.log_end),
            "-" if row.lag is None else str(row.lag),
            row.metadata,
        )
    Console().print(table)
    total = sum(row.lag or 0 for row in rows)
    click.echo(f"total lag: {total}")
