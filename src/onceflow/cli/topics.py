"""``onceflow topics``: any cluster's topics (list, describe), one topic at a time as
kafka-topics does it (create, alter, delete TOPIC), and topics as code (a topics.yaml:
``topics_file.py``)."""

from __future__ import annotations

from typing import Any

import click

from onceflow.cli.options import ClientSettings, cluster_options, json_option, parse_key_values
from onceflow.cli.output import print_json, print_rows, print_table
from onceflow.cli.topics_file import (
    FILE_PARAMETERS,
    HELP,
    file_options,
    run_file_command,
)

KEYED_DATA_WARNING = (
    "warning: adding partitions changes hash(key) % partitions: records with a key go to "
    "other partitions from now on, so per-key order across the change is not kept"
)


@click.group("topics")
def topics_command() -> None:
    """Topics of any cluster (list, describe; create, alter, delete one TOPIC as
    kafka-topics does) and topics as code (a topics.yaml).

    The topics-file commands validate the whole file first and print their plan as a
    diff. Their exit codes: 0 success, 1 errors, 2 changes planned or made (only with
    --detailed-exitcode; without it, 2 is a cluster that cannot be reached). The file
    format and each command: onceflow docs topics.
    """


def _make_file_command(name: str) -> click.Command:
    @cluster_options
    @file_options
    def command(client: ClientSettings, **options: Any) -> None:
        run_file_command(name, client, **options)

    return click.command(name, help=HELP[name])(command)


for _name in ("plan", "migrate", "repartition", "reset", "align"):
    topics_command.add_command(_make_file_command(_name))


def _refuse(given: list[str], reason: str) -> None:
    if given:
        raise click.UsageError(f"{given[0]} {reason}")


def _given(*parameters: str) -> list[str]:
    """The options among ``parameters`` set on the command line, as they are spelled."""
    context = click.get_current_context()
    spelled = {p.name: p.opts[0] for p in context.command.params}
    return [
        spelled[name]
        for name in parameters
        if context.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    ]


@topics_command.command("create")
@cluster_options
@file_options
@click.argument("topics", nargs=-1, metavar="[TOPIC]...")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="With TOPIC: its partitions (default: the broker's num.partitions).",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="With TOPIC: its replicas (default: the broker's default.replication.factor).",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="With TOPIC: a topic config by Kafka's name, e.g. retention.ms=3600000. Repeatable.",
)
@click.option("--if-not-exists", is_flag=True, help="With TOPIC: exit 0 when it exists already.")
def create_command(
    client: ClientSettings,
    topics: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    **file_settings: Any,
) -> None:
    """Create TOPIC as kafka-topics --create does, or the topics file's topics.

    With TOPIC (several allowed): create it with --partitions, --replication-factor and
    --config; exit 1 if it exists (0 with --if-not-exists), 2 if the cluster rejects a
    setting. Without TOPIC: create the declared topics that do not exist and leave
    existing ones alone (the topics-file options).
    """
    from onceflow.admin.topics import create_topic

    one_topic = ("partitions", "replication_factor", "configs", "if_not_exists")
    if not topics:
        _refuse(_given(*one_topic), "needs a TOPIC: onceflow topics create TOPIC --partitions 3")
        run_file_command("create", client, **file_settings)
    _refuse(_given(*FILE_PARAMETERS, "yes"), "applies to the topics file, not to TOPIC")
    settings = parse_key_values(configs, "--config")
    session = client.session()
    for name in topics:
        topic = create_topic(session, name, partitions, replication_factor, settings, if_not_exists)
        if topic.existed:
            click.echo(f"topic {name} already exists: left as it is")
            continue
        plural = "partition" if topic.partitions == 1 else "partitions"
        click.echo(
            f"created topic {name}: {topic.partitions} {plural}, "
            f"replication factor {topic.replication_factor}"
        )


@topics_command.command("delete")
@cluster_options
@file_options
@click.argument("topics", nargs=-1, metavar="[TOPIC]...")
@click.option("--if-exists", is_flag=True, help="With TOPIC: exit 0 when it does not exist.")
def delete_command(
    client: ClientSettings, topics: tuple[str, ...], if_exists: bool, **file_settings: Any
) -> None:
    """Delete TOPIC and its data as kafka-topics --delete does, or the topics file's
    topics; either needs --yes.

    With TOPIC (several allowed): exit 1 if one does not exist (0 with --if-exists).
    Without TOPIC: delete the declared topics (the topics-file options).
    """
    from onceflow.admin.errors import Refused
    from onceflow.admin.topics import delete_topics

    if not topics:
        _refuse(_given("if_exists"), "needs a TOPIC: onceflow topics delete TOPIC --yes")
        run_file_command("delete", client, **file_settings)
    _refuse(_given(*FILE_PARAMETERS), "applies to the topics file, not to TOPIC")
    if not file_settings["yes"]:
        what = ("topic " if len(topics) == 1 else "topics ") + ", ".join(topics)
        raise Refused(f"deleting {what} deletes {'its' if len(topics) == 1 else 'their'} "
                      "data: add --yes to do it")  # fmt: skip
    for name in delete_topics(client.session(), list(topics), if_exists):
        click.echo(f"deleted topic {name}")


@topics_command.command("alter")
@cluster_options
@click.argument("topic")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    required=True,
    help="The topic's new number of partitions (Kafka only adds partitions).",
)
@click.option("--if-exists", is_flag=True, help="Exit 0 when the topic does not exist.")
def alter_command(client: ClientSettings, topic: str, partitions: int, if_exists: bool) -> None:
    """Add partitions to TOPIC, as kafka-topics --alter --partitions does.

    Exit 1 if the topic does not exist (0 with --if-exists), 2 if the cluster refuses
    the count (fewer than it has: INVALID_PARTITIONS). Topic configs: the topics file
    (onceflow topics align).
    """
    from onceflow.admin.topics import add_partitions

    if add_partitions(client.session(), topic, partitions, if_exists):
        click.echo(KEYED_DATA_WARNING, err=True)
        click.echo(f"topic {topic} now has {partitions} partitions")


@topics_command.command("list")
@cluster_options
@json_option
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets...).")
def list_command(client: ClientSettings, as_json: bool, internal: bool) -> None:
    """List the cluster's topics with their partitions and replication factor.

    Exit 3 if the principal may not describe the cluster and sees no topic at all.
    """
    from onceflow.admin.topics import list_topics

    print_rows(
        list_topics(client.session(), internal),
        as_json,
        ("topic", "partitions", "replication factor"),
        lambda r: (r.name, r.partitions, r.replication_factor),
    )


@topics_command.command("describe")
@cluster_options
@json_option
@click.argument("topics", nargs=-1, required=True)
def describe_command(client: ClientSettings, as_json: bool, topics: tuple[str, ...]) -> None:
    """Partitions (leader, replicas, in-sync replicas, online or offline) and configs set
    on each topic. An offline partition (a Metadata error such as KAFKA_STORAGE_ERROR when
    its log is damaged on disk, or no leader) is named after the table with the reason.

    Exit 1 if a topic does not exist, 3 if the principal may not describe it (0 with
    offline partitions: they are described).
    """
    from onceflow.admin.topics import describe_topics

    described = describe_topics(client.session(), list(topics))
    if as_json:
        print_json(described)
        return
    for topic in described:
        configs = ",".join(f"{k}={v}" for k, v in topic.configs.items()) or "-"
        click.echo(f"topic {topic.name}  partitions {len(topic.partitions)}  configs {configs}")
        print_table(
            ("topic", "partition", "leader", "replicas", "isr", "state"),
            [
                (
                    topic.name,
                    p.partition,
                    "none" if p.leader < 0 else p.leader,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                    "offline" if p.problem else "online",
                )
                for p in topic.partitions
            ],
        )
        for p in topic.partitions:
            if p.problem:
                click.echo(f"{topic.name}-{p.partition}: {p.problem}")
