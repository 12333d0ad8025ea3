"""The topics-file commands of ``onceflow topics``: plan, migrate, create, delete,
repartition, reset and align applied from a topics.yaml.

Exit codes: 0 success (with ``--detailed-exitcode``: and nothing to change), 1 errors
(invalid spec, impossible change, lock timeout, cluster error), 2 changes planned or made
(only with ``--detailed-exitcode``) or, without it, a cluster that cannot be reached.
confluent-kafka is imported only when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from onceflow.cli.options import EXIT_UNAVAILABLE, ClientSettings

HELP = {
    "plan": "Show what migrate would change, as a diff; change nothing.",
    "migrate": "Create missing topics, add partitions and align configs (idempotent).",
    "create": "Create the declared topics that do not exist; leave existing ones alone.",
    "delete": "Delete the declared topics and their data (needs --yes).",
    "repartition": "Add partitions to declared topics that have fewer than declared.",
    "reset": "Delete and re-create the declared topics, losing their data (needs --yes).",
    "align": "Change the configs of existing topics to the declared values only.",
}
# The parameters of the topics-file options (``--yes`` aside: delete TOPIC takes it too).
FILE_PARAMETERS = ("file", "env", "strict", "detailed_exitcode", "lock_timeout")


def file_options(function: Any) -> Any:
    """The options of the topics-file commands, before the command's own."""
    options = [
        click.option(
            "--file",
            "-f",
            "file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=Path("topics.yaml"),
            show_default=True,
            help="The topics file.",
        ),
        click.option(
            "--env",
            "env",
            envvar="ONCEFLOW_ENV",
            help="Apply this environment's overrides from the file (env ONCEFLOW_ENV).",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Fail on topics on the cluster that are not declared (__internal ones aside).",
        ),
        click.option(
            "--detailed-exitcode",
            is_flag=True,
            help="Exit 0 when nothing changes, 2 when there are changes, 1 on errors.",
        ),
        click.option("--yes", "-y", is_flag=True, help="Confirm delete and reset."),
        click.option(
            "--lock-timeout",
            type=float,
            default=30.0,
            show_default=True,
            help="Seconds to wait for the cluster lock another run holds (plan takes none).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def run_file_command(
    name: str, client: ClientSettings, file: Path, detailed_exitcode: bool, **run_options: Any
) -> None:
    """Run a topics-file command for the CLI and exit with its code."""
    raise SystemExit(
        run_command(
            name, file, client.bootstrap, detailed_exitcode, client_config=client.extra,
            **run_options,
        )
    )  # fmt: skip


def run_command(
    name: str, file: Path, bootstrap: str, detailed_exitcode: bool, **run_options: Any
) -> int:
    """Run one command, print its plan and outcome; return the exit code.

    ``run_options`` are ``onceflow.topics.run``'s keyword arguments: ``env``, ``strict``,
    ``yes``, ``lock_timeout``, ``client_config``.
    """
    from onceflow.topics import (
        ClusterUnreachable,
        ConfirmationRequired,
        PlanError,
        SpecError,
        TopicsError,
        run,
    )
    from onceflow.topics.lock import describe_holder
    from onceflow.topics.plan import render

    console = Console(soft_wrap=True)
    errors = Console(stderr=True, soft_wrap=True)
    lock_timeout = run_options["lock_timeout"]

    def on_wait(holder: dict[str, Any] | None) -> None:
        errors.print(
            f"waiting up to {lock_timeout:g} s for the topics lock, held by "
            f"{escape(describe_holder(holder))}"
        )

    try:
        plan = run(
            name,
            file,
            bootstrap,
            **run_options,
            on_plan=lambda plan: render(plan, console),
            on_lock_wait=on_wait,
        )
    except SpecError as error:
        count = len(error.problems)
        problems = f"{count} problem" + ("s" if count != 1 else "")
        errors.print(f"[bold red]invalid topics file[/bold red] ({problems}):")
        for problem in error.problems:
            errors.print(f"  {escape(str(problem))}")
        return 1
    except PlanError:
        errors.print("[bold red]refused:[/bold red] the plan has errors; nothing was changed")
        return 1
    except ConfirmationRequired as error:
        errors.print(f"[bold red]error:[/bold red] {escape(str(error))}")
        return 1
    except ClusterUnreachable as error:  # with --detailed-exitcode, 2 means "changes"
        errors.print(f"[bold red]error:[/bold red] {escape(str(error))}")
        return 1 if detailed_exitcode else EXIT_UNAVAILABLE
    except TopicsError as error:
        errors.print(f"[bold red]error:[/bold red] {escape(str(error))}")
        return 1
    if plan.applied and plan.has_changes:
        console.print(f"[bold green]{escape(plan.summary())}[/bold green]")
    return plan.exit_code(detailed_exitcode)
