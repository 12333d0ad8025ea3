"""``onceflow kafka-cluster``: a real Apache Kafka KRaft cluster on loopback until Ctrl-C."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType

import click

from onceflow.cli.options import parse_key_values


@click.command("kafka-cluster")
@click.option("--nodes", default=3, show_default=True, help="Combined broker+controller nodes.")
@click.option(
    "--port",
    default=0,
    show_default=True,
    help="Node 1's broker port; node N gets PORT+N-1 (0: free ports).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the nodes' data here (default: a temporary directory, deleted at exit).",
)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker setting for every node, by Kafka's name (repeatable).",
)
@click.option(
    "--fetch",
    is_flag=True,
    help="Only fetch Apache Kafka's jars into the cache (and archive its classes for a "
    "faster start).",
)
def kafka_cluster_command(
    nodes: int, port: int, data_dir: Path | None, settings: tuple[str, ...], fetch: bool
) -> None:
    """Run Apache Kafka (the release onceflow pins) as a KRaft cluster on 127.0.0.1.

    The jars come from Maven once and are cached. Prints `bootstrap HOST:PORT,...` once
    every node serves metadata, then runs until Ctrl-C or SIGTERM and stops every node.
    Exit 1 with one line when Java or Maven is missing, Maven is unreachable or a node
    cannot start (e.g. its port is taken). More: onceflow docs kafka-cluster.
    """
    from onceflow.kafka_cluster import KAFKA_VERSION, KafkaCluster, KafkaClusterError, ensure_jars
    from onceflow.kafka_cluster.archive_maker import make_archive
    from onceflow.kafka_cluster.node import find_java

    config = parse_key_values(settings, "--config")
    try:
        if fetch:
            click.echo(f"Apache Kafka {KAFKA_VERSION} jars: {ensure_jars()}")
            archive = make_archive(find_java())
            click.echo(f"class-data archive: {archive or 'none (this JVM cannot make one)'}")
            return
        ensure_jars()
        find_java()
        cluster = KafkaCluster(nodes, directory=data_dir, port=port, config=config)
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
        click.echo(f"starting Apache Kafka {KAFKA_VERSION}: {nodes} KRaft node(s)...", err=True)
        with cluster:
            for node_id, node in cluster.nodes.items():
                click.echo(
                    f"node {node_id}: broker {node.bootstrap}, controller "
                    f"127.0.0.1:{node.controller_port}, log {node.log_path}",
                    err=True,
                )
            click.echo(f"bootstrap {cluster.bootstrap}")
            sys.stdout.flush()
            click.echo(f"ready in {cluster.start_seconds:.1f}s; Ctrl-C stops it", err=True)
            signal.pause()
    except KafkaClusterError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
