"""Options every ``onceflow`` command shares, and its exit codes.

A command that talks to a cluster takes ``@cluster_options``: ``--bootstrap`` (one default
everywhere, comma-separated hosts), ``-X key=value`` and ``--command-config FILE``
(librdkafka settings, e.g. security.protocol), ``--debug`` (librdkafka's logs and
tracebacks) and ``--log-level``; it receives them merged as one ``ClientSettings``. A
command that prints data takes ``@json_option``.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

EXIT_OK = 0
EXIT_FOUND = 1  # anomalies found, or an unknown group/topic/transactional id, or refused
EXIT_UNAVAILABLE = 2  # the cluster (or a source) could not be reached or checked
EXIT_NOT_AUTHORIZED = 3  # the principal may not do or see this (*_AUTHORIZATION_FAILED)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "ONCEFLOW_BOOTSTRAP"
DEBUG_META = "onceflow.debug"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def parse_key_values(pairs: Iterable[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; a clear usage error for anything else."""
    parsed = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        parsed[key.strip()] = value.strip()
    return parsed


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as Kafka's --command-config reads it (KEY=VALUE or KEY: VALUE)."""
    try:
        text = path.read_text()
    except OSError as error:
        raise click.BadParameter(
            f"cannot read {path}: {error.strerror}", param_hint="--command-config"
        ) from None
    properties: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        if line.endswith("\\"):  # continued on the next line
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise click.BadParameter(
                f"{path}:{number}: expected KEY=VALUE, got {raw.strip()!r}",
                param_hint="--command-config",
            )
        properties[line[:cut].strip()] = line[cut + 1 :].strip()
    return properties


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def log_level_option(default: str = "WARNING") -> Callable[[Any], Any]:
    return click.option(
        "--log-level",
        default=default,
        show_default=True,
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        help="Python logging level (on stderr).",
    )


@dataclass(frozen=True)
class ClientSettings:
    """The merged client config of one command, and how verbose to be."""

    conf: dict[str, Any]
    debug: bool = False
    timeout: float = 15.0

    @property
    def bootstrap(self) -> str:
        return str(self.conf["bootstrap.servers"])

    @property
    def extra(self) -> dict[str, Any]:
        """The settings besides bootstrap.servers (for library calls taking both)."""
        return {k: v for k, v in self.conf.items() if k != "bootstrap.servers"}

    def session(self) -> Any:
        from onceflow.admin.connect import ClusterSession

        return ClusterSession(self.conf, self.timeout)


def build_settings(
    bootstrap: str,
    bootstrap_source: ParameterSource | None,
    command_config: Path | None,
    settings: tuple[str, ...],
    debug: bool,
) -> ClientSettings:
    """--command-config, then -X, over the defaults.

    ``bootstrap.servers``, most explicit first: the --bootstrap flag, -X, the
    --command-config file, $ONCEFLOW_BOOTSTRAP, the default. Sources that disagree are
    reported on stderr, naming the one used.
    """
    from onceflow.admin.connect import client_config

    from_file = read_properties(command_config) if command_config is not None else {}
    from_x = parse_key_values(settings, "-X")
    candidates = [
        ("--bootstrap", bootstrap if bootstrap_source == ParameterSource.COMMANDLINE else None),
        ("-X bootstrap.servers", from_x.get("bootstrap.servers")),
        (f"bootstrap.servers in {command_config}", from_file.get("bootstrap.servers")),
        (
            f"${BOOTSTRAP_ENV}",
            bootstrap if bootstrap_source == ParameterSource.ENVIRONMENT else None,
        ),
    ]
    given = [(source, value) for source, value in candidates if value]
    chosen = given[0][1] if given else bootstrap
    for source, value in given[1:]:
        if value != chosen:
            click.echo(
                f"warning: using bootstrap servers {chosen} from {given[0][0]}, "
                f"not {value} from {source}",
                err=True,
            )
    conf = client_config(chosen, {**from_file, **from_x}, debug=debug)
    conf["bootstrap.servers"] = chosen
    return ClientSettings(conf, debug)


CLUSTER_OPTIONS = (
    click.option(
        "--bootstrap",
        "-b",
        envvar=BOOTSTRAP_ENV,
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"Bootstrap servers of the cluster; wins over -X and --command-config, "
        f"which win over ${BOOTSTRAP_ENV}.",
    ),
    click.option(
        "-X",
        "--client-config",
        "client_settings",
        multiple=True,
        metavar="KEY=VALUE",
        help="librdkafka client setting, e.g. -X security.protocol=SSL. Repeatable.",
    ),
    click.option(
        "--command-config",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help="Properties file of client settings (like Kafka's tools); -X wins over it.",
    ),
    click.option(
        "--debug",
        is_flag=True,
        help="Show librdkafka's logs and full tracebacks.",
    ),
)


def cluster_options(
    function: Callable[..., Any] | None = None, *, log_level: str = "WARNING"
) -> Any:
    """Add the shared cluster options; the command receives ``client: ClientSettings``.

    ``@cluster_options`` or ``@cluster_options(log_level="INFO")`` (the default level).
    """
    if function is None:
        return functools.partial(cluster_options, log_level=log_level)
    return _with_cluster_options(function, log_level)


def _with_cluster_options(function: Callable[..., Any], default_level: str) -> Any:

    @functools.wraps(function)
    def command(
        *args: Any,
        bootstrap: str,
        client_settings: tuple[str, ...],
        command_config: Path | None,
        debug: bool,
        log_level: str,
        **kwargs: Any,
    ) -> Any:
        context = click.get_current_context()
        context.meta[DEBUG_META] = debug
        setup_logging("DEBUG" if debug else log_level)
        source = context.get_parameter_source("bootstrap")
        client = build_settings(bootstrap, source, command_config, client_settings, debug)
        return function(*args, client=client, **kwargs)

    for option in reversed((*CLUSTER_OPTIONS, log_level_option(default_level))):
        command = option(command)
    return command


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON on stdout."
)
