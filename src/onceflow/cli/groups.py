"""``onceflow groups``: list, describe, offsets and lag, reset-offsets, delete."""

from __future__ import annotations

import click

from onceflow.admin.groups import GROUP_TYPES
from onceflow.cli.options import ClientSettings, cluster_options, json_option
from onceflow.cli.output import print_json, print_rows, print_table


@click.group("groups")
def groups_command() -> None:
    """Consumer groups: members, assignments, committed offsets and lag; reset and delete.

    Works against onceflow's broker and any Kafka cluster. An unknown group is exit 1.
    """


@groups_command.command("list")
@cluster_options
@json_option
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(GROUP_TYPES, case_sensitive=False),
    help="Only groups of this protocol: classic (simple groups included), or consumer "
    "(KIP-848). Repeatable.",
)
@click.option(
    "--internal",
    is_flag=True,
    help="Include onceflow's internal groups (onceflow-topics-lock, the lock of topics migrate).",
)
def list_command(
    client: ClientSettings, as_json: bool, types: tuple[str, ...], internal: bool
) -> None:
    """List the consumer groups with their type, state, members and assignor.

    Type is the group protocol, as kafka-consumer-groups --list --type shows it: classic
    (JoinGroup/SyncGroup) or consumer (KIP-848); `simple` is a classic group that only
    committed offsets (no member ever joined). Exit 3 if the principal may see no group
    at all.
    """
    from onceflow.admin.groups import list_groups

    print_rows(
        list_groups(client.session(), tuple(t.lower() for t in types), internal),
        as_json,
        ("group", "type", "state", "members", "assignor"),
        lambda r: (r.group, r.type, r.state, r.members, r.assignor),
    )


@groups_command.command("describe")
@cluster_options
@json_option
@click.argument("group")
def describe_command(client: ClientSettings, as_json: bool, group: str) -> None:
    """Show a group's state, assignor, coordinator and each member's partitions."""
    from onceflow.admin.groups import describe_group

    description = describe_group(client.session(), group)
    if as_json:
        print_json(description)
        return
    click.echo(
        f"group {group}  state {description.state}  assignor {description.assignor or '-'}  "
        f"coordinator {description.coordinator or '-'}"
    )
    print_table(
        ("member id", "client id", "host", "instance id", "partitions"),
        [
            (m.member_id, m.client_id, m.host, m.instance_id, _partitions(m.partitions))
            for m in description.members
        ],
    )


def _partitions(partitions: list[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(
        f"{topic}[{','.join(str(p) for p in sorted(parts))}]"
        for topic, parts in sorted(by_topic.items())
    )


@groups_command.command("offsets")
@cluster_options
@json_option
@click.argument("group")
def offsets_command(client: ClientSettings, as_json: bool, group: str) -> None:
    """Committed offset, log end offset and lag for each partition the group committed."""
    from onceflow.admin.groups import committed_offsets

    rows = committed_offsets(client.session(), group)
    print_rows(
        rows,
        as_json,
        ("topic", "partition", "committed", "log end", "lag", "metadata"),
        lambda r: (r.topic, r.partition, r.committed, r.log_end, r.lag, r.metadata),
    )
    if not as_json:
        click.echo(f"total lag: {sum(row.lag or 0 for row in rows)}")


@groups_command.command("reset-offsets")
@cluster_options
@json_option
@click.argument("group")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P...]",
    help="Reset this topic (or these partitions of it). Repeatable.",
)
@click.option(
    "--all-topics", is_flag=True, help="Reset every partition the group has committed offsets for."
)
@click.option("--to-earliest", is_flag=True, help="To each partition's log start.")
@click.option("--to-latest", is_flag=True, help="To each partition's log end.")
@click.option("--to-current", is_flag=True, help="To the committed offset (log end if none).")
@click.option("--to-offset", type=int, default=None, metavar="OFFSET", help="To this offset.")
@click.option(
    "--shift-by",
    type=int,
    default=None,
    metavar="N",
    help="Move the committed offset by N (negative: back).",
)
@click.option(
    "--to-datetime",
    default=None,
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="To the first record at or after this time (local time unless a zone "
    "such as +00:00 is given).",
)
@click.option(
    "--by-duration",
    default=None,
    metavar="PnDTnHnMnS",
    help="To the first record at or after this long ago, e.g. PT30M.",
)
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def reset_offsets_command(
    client: ClientSettings,
    as_json: bool,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_current: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    dry_run: bool,
    execute: bool,
) -> None:
    """Reset a group's committed offsets, like kafka-consumer-groups --reset-offsets.

    The group must have no members (Empty), or the reset is refused (exit 1). Choose the
    partitions (--topic or --all-topics) and one target; new offsets are kept between the
    log start and the log end, and the plan's note says where one was clamped. Without
    --execute it only prints the plan. --all-topics of an unknown group is exit 1 (name
    the partitions with --topic to give a new group its first offsets).
    """
    from onceflow.admin.offset_reset import (
        ResetTarget,
        execute_reset,
        parse_topic_selection,
        plan_reset,
    )

    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if dry_run and execute:
        raise click.UsageError("choose one of --dry-run and --execute")
    chosen = {
        "earliest": to_earliest,
        "latest": to_latest,
        "current": to_current,
        "offset": to_offset is not None,
        "shift": shift_by is not None,
        "datetime": to_datetime is not None,
        "duration": by_duration is not None,
    }
    kinds = [kind for kind, given in chosen.items() if given]
    if len(kinds) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--shift-by, --to-datetime, --by-duration"
        )
    try:
        if kinds[0] == "datetime":
            target = ResetTarget.at_datetime(str(to_datetime))
        elif kinds[0] == "duration":
            target = ResetTarget.by_duration(str(by_duration))
        else:
            value = to_offset if kinds[0] == "offset" else shift_by
            target = ResetTarget(kinds[0], value or 0)
        selection = None if all_topics else [parse_topic_selection(t) for t in topics]
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    session = client.session()
    resets = plan_reset(session, group, selection, target)
    if execute:
        execute_reset(session, group, resets)
    if as_json:
        print_json({"group": group, "executed": execute, "offsets": resets})
        return
    print_table(
        ("group", "topic", "partition", "current offset", "new offset", "note"),
        [(group, r.topic, r.partition, r.current, r.new, r.note) for r in resets],
    )
    clamped = sum(1 for r in resets if r.note)
    if clamped:
        click.echo(
            f"{clamped} partition(s) clamped: the requested offset is outside the log "
            "(see note); the new offset is the log start or end"
        )
    if not execute:
        click.echo("dry run: nothing committed (add --execute to commit these offsets)")


@groups_command.command("delete")
@cluster_options
@click.argument("groups", nargs=-1, required=True)
def delete_command(client: ClientSettings, groups: tuple[str, ...]) -> None:
    """Delete consumer groups and their committed offsets.

    Refused (exit 1) for a group that still has members; exit 1 for an unknown group.
    """
    from onceflow.admin.groups import delete_groups

    delete_groups(client.session(), list(groups))
    for group in groups:
        click.echo(f"deleted group {group}")
