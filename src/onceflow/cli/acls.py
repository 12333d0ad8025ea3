"""``onceflow acls``: list, create and delete ACLs with kafka-acls' options."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from onceflow.admin.acls import CLUSTER_NAME, OPERATIONS, PATTERN_TYPES, Resource
from onceflow.cli.options import ClientSettings, cluster_options, json_option
from onceflow.cli.output import print_rows

COLUMNS = ("principal", "host", "operation", "permission", "resource type", "name", "pattern")


def _cells(acl: Any) -> tuple[str, ...]:
    return (
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission,
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
    )


def _resource_options(required: bool) -> Callable[[Any], Any]:
    """--topic, --group, --transactional-id and --cluster, given to the command as one
    ``resources`` list (a usage error when ``required`` and none is given)."""

    def decorate(function: Any) -> Any:
        @functools.wraps(function)
        def command(
            *args: Any,
            topics: tuple[str, ...],
            groups: tuple[str, ...],
            transactional_ids: tuple[str, ...],
            cluster: bool,
            **kwargs: Any,
        ) -> Any:
            resources = _resources(topics, groups, transactional_ids, cluster)
            if required and not resources:
                raise click.UsageError(
                    "give a resource: --topic, --group, --transactional-id or --cluster"
                )
            return function(*args, resources=resources, **kwargs)

        options = [
            click.option("--topic", "topics", multiple=True, help="A topic (repeatable)."),
            click.option("--group", "groups", multiple=True, help="A consumer group (repeatable)."),
            click.option(
                "--transactional-id",
                "transactional_ids",
                multiple=True,
                help="A transactional id (repeatable).",
            ),
            click.option(
                "--cluster",
                is_flag=True,
                help="The cluster resource (Kafka names it kafka-cluster).",
            ),
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _principal_options(function: Any) -> Any:
    """--allow-principal, --deny-principal and --operation, given to the command as ``who``
    (checked (permission, principal) pairs) and ``operations``."""

    @functools.wraps(function)
    def command(
        *args: Any,
        allow_principals: tuple[str, ...],
        deny_principals: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        return function(*args, who=_principals(allow_principals, deny_principals), **kwargs)

    options = [
        click.option(
            "--allow-principal",
            "allow_principals",
            multiple=True,
            metavar="PRINCIPAL",
            help="Principal to allow, e.g. User:alice (repeatable).",
        ),
        click.option(
            "--deny-principal",
            "deny_principals",
            multiple=True,
            metavar="PRINCIPAL",
            help="Principal to deny, e.g. User:mallory (repeatable).",
        ),
        click.option(
            "--operation",
            "operations",
            multiple=True,
            metavar="OPERATION",
            help=f"Operation (repeatable): {', '.join(OPERATIONS)}.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _pattern_option(default: str) -> Any:
    return click.option(
        "--resource-pattern-type",
        "pattern_type",
        type=click.Choice(PATTERN_TYPES, case_sensitive=False),
        default=default,
        show_default=True,
        help="literal or prefixed; as a filter (list, delete) also any (exact name, any "
        "pattern type) or match (every ACL that applies to the name).",
    )


def _resources(
    topics: tuple[str, ...], groups: tuple[str, ...], ids: tuple[str, ...], cluster: bool
) -> list[Resource]:
    return [
        *(Resource("TOPIC", name) for name in topics),
        *(Resource("GROUP", name) for name in groups),
        *(Resource("TRANSACTIONAL_ID", name) for name in ids),
        *([Resource("BROKER", CLUSTER_NAME)] if cluster else []),
    ]


def _principals(allow: tuple[str, ...], deny: tuple[str, ...]) -> list[tuple[str, str]]:
    for principal in (*allow, *deny):
        if ":" not in principal:
            raise click.BadParameter(
                f"expected TYPE:NAME such as User:alice, got {principal!r}",
                param_hint="--allow-principal/--deny-principal",
            )
    return [("allow", p) for p in allow] + [("deny", p) for p in deny]


@click.group("acls")
def acls_command() -> None:
    """ACLs of a cluster with an authorizer: list, create, delete (like kafka-acls).

    Needs a principal allowed to describe (list) or alter (create, delete) the cluster.
    Exit 3 when it is not; exit 2 if the cluster has no authorizer (SECURITY_DISABLED).
    """


@acls_command.command("list")
@cluster_options
@json_option
@_resource_options(required=False)
@click.option(
    "--principal",
    "principals",
    multiple=True,
    metavar="PRINCIPAL",
    help="Only ACLs of this principal (repeatable).",
)
@_pattern_option("literal")
def list_command(
    client: ClientSettings,
    as_json: bool,
    resources: list[Resource],
    principals: tuple[str, ...],
    pattern_type: str,
) -> None:
    """List ACLs: every one, or those on the resources given (of the principals given).

    With no resource every ACL is listed, whatever --resource-pattern-type says. Exit 3
    for a principal that may not describe the cluster.
    """
    from onceflow.admin.acls import filters, list_acls

    who = [(permission, p) for p in principals for permission in ("allow", "deny")]
    found = list_acls(client.session(), filters(resources, who, (), pattern_type.lower()))
    print_rows(found, as_json, COLUMNS, _cells)


@acls_command.command("create")
@cluster_options
@json_option
@_resource_options(required=True)
@_principal_options
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST",
    help="Host the allowed principals may connect from (default: any, *).",
)
@click.option(
    "--deny-host",
    "deny_hosts",
    multiple=True,
    metavar="HOST",
    help="Host the denied principals are denied from (default: any, *).",
)
@_pattern_option("literal")
def create_command(
    client: ClientSettings,
    as_json: bool,
    resources: list[Resource],
    who: list[tuple[str, str]],
    operations: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    pattern_type: str,
) -> None:
    """Create ACLs: each principal, host and operation on each resource given."""
    from onceflow.admin.acls import bindings, create_acls

    if not who:
        raise click.UsageError("give --allow-principal or --deny-principal")
    if not operations:
        raise click.UsageError("give --operation (e.g. --operation Read)")
    hosts = {"allow": list(allow_hosts) or ["*"], "deny": list(deny_hosts) or ["*"]}
    try:
        new = bindings(resources, who, hosts, operations, pattern_type.lower())
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    created = create_acls(client.session(), new)
    if as_json:
        print_rows(created, True, COLUMNS, _cells)
        return
    click.echo(f"created {len(created)} ACL(s):")
    print_rows(created, False, COLUMNS, _cells)


@acls_command.command("delete")
@cluster_options
@json_option
@_resource_options(required=True)
@_principal_options
@_pattern_option("literal")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
def delete_command(
    client: ClientSettings,
    as_json: bool,
    resources: list[Resource],
    who: list[tuple[str, str]],
    operations: tuple[str, ...],
    pattern_type: str,
    force: bool,
) -> None:
    """Delete the ACLs on the resources given that match the principals and operations
    given (all of them on those resources if none are given)."""
    from onceflow.admin.acls import delete_acls, filters

    try:
        chosen = filters(resources, who, operations, pattern_type.lower())
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if not force:
        names = ", ".join(f"{r.type.lower()} {r.name}" for r in resources)
        click.confirm(f"delete the matching ACLs on {names}?", abort=True, err=True)
    deleted = delete_acls(client.session(), chosen)
    if as_json:
        print_rows(deleted, True, COLUMNS, _cells)
        return
    if not deleted:
        click.echo("no ACL matched; nothing deleted")
        return
    click.echo(f"deleted {len(deleted)} ACL(s):")
    print_rows(deleted, False, COLUMNS, _cells)
