"""The ``onceflow`` group: every failure of every command is one line and an exit code."""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

import click

from onceflow import __version__
from onceflow.admin.errors import AdminError, NotAuthorized, NotFound, Refused
from onceflow.cli.options import DEBUG_META, EXIT_FOUND, EXIT_NOT_AUTHORIZED, EXIT_UNAVAILABLE

# name: (module, attribute); a command's module is imported when the command is used
COMMANDS = {
    "broker": ("onceflow.cli.broker", "broker"),
    "demo": ("onceflow.cli.demo", "demo_command"),
    "topics": ("onceflow.cli.topics", "topics_command"),
    "groups": ("onceflow.cli.groups", "groups_command"),
    "transactions": ("onceflow.cli.transactions", "transactions_command"),
    "acls": ("onceflow.cli.acls", "acls_command"),
    "verify": ("onceflow.cli.verify", "verify_command"),
    "chaos": ("onceflow.cli.chaos", "chaos_command"),
    "prove": ("onceflow.cli.prove", "prove_command"),
    "relay": ("onceflow.cli.relay", "relay_command"),
    "log": ("onceflow.cli.log", "log_command"),
    "console": ("onceflow.cli.console", "console_command"),
    "kafka-cluster": ("onceflow.cli.kafka_cluster", "kafka_cluster_command"),
    "docs": ("onceflow.cli.docs", "docs_command"),
}


class OnceflowGroup(click.Group):
    """Turns the errors of any subcommand into one line on stderr and Kafka-tool exit codes.

    Unknown group/topic/transactional id or a refused operation: exit 1; a cluster that
    cannot be reached or answers with an error: exit 2; an operation or a resource the
    principal is not authorized for: exit 3. ``--debug`` adds the traceback.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (NotFound, Refused) as error:
            self._fail(ctx, error, EXIT_FOUND)
        except NotAuthorized as error:
            self._fail(ctx, error, EXIT_NOT_AUTHORIZED)
        except AdminError as error:
            self._fail(ctx, error, EXIT_UNAVAILABLE)
        except (ConnectionError, TimeoutError) as error:  # a broker went away mid-request
            self._fail(ctx, error, EXIT_UNAVAILABLE, prefix="lost the connection: ")
        except Exception as error:
            if type(error).__name__ != "KafkaException":
                raise
            from onceflow.admin.connect import translate

            translated = translate(error, "request failed")
            code = EXIT_FOUND if isinstance(translated, NotFound | Refused) else EXIT_UNAVAILABLE
            if isinstance(translated, NotAuthorized):
                code = EXIT_NOT_AUTHORIZED
            self._fail(ctx, translated, code)

    @staticmethod
    def _fail(ctx: click.Context, error: BaseException, code: int, prefix: str = "") -> None:
        if ctx.meta.get(DEBUG_META):
            traceback.print_exc(file=sys.stderr)
        click.echo(f"error: {prefix}{error}", err=True)
        ctx.exit(code)


@click.group(cls=OnceflowGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onceflow")
def main() -> None:
    """Exactly-once Kafka pipelines for Python and PySpark.

    Exit codes: 0 success; 1 anomalies found, an unknown group, topic or transactional
    id, or an operation refused; 2 the cluster (or a source) could not be reached or
    checked (including failed authentication), or the command line is invalid; 3 not
    authorized (the principal may not do or see this). The topics-file commands with
    --detailed-exitcode and log say otherwise in their help. Every command and its
    options: onceflow docs cli; all the documentation: onceflow docs.
    """
