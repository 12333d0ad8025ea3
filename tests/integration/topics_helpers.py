"""Helpers of the ``onceflow topics`` tests (test_topics_*.py) against a real onceflow
broker, read back with confluent-kafka: a view of the cluster (and its ``cluster``
fixture, a fresh broker per test, served by conftest.py), spec files, and the CLI run
as a real process (``topics_process``) where processes matter (the lock, exit codes of a
real run) or through click's CliRunner (``topics_cli``) elsewhere, to keep the tests fast."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigSource, ResourceType

from onceflow.cli import main
from onceflow.testing import BrokerProcess
from tests.kit.clients import alter_configs, config_op, create_topic, describe_configs, produce

ROOT = Path(__file__).resolve().parents[2]
DEMO_TOPICS = ROOT / "examples" / "orders" / "topics.yaml"
DYNAMIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
# The CLI must not pick up a bootstrap or environment from the shell running the tests.
CLI_ENV = {key: value for key, value in os.environ.items() if not key.startswith("ONCEFLOW_")}


class ClusterView:
    """What the broker says about its topics, through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})

    def all_topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def topics(self) -> set[str]:
        """User topics: without internal ones such as __consumer_offsets and the lock's."""
        return {name for name in self.all_topics() if not name.startswith("__")}

    def partitions(self, topic: str) -> int:
        return len(self.admin.list_topics(topic, timeout=10).topics[topic].partitions)

    def configs(self, topic: str) -> dict[str, tuple[str | None, int]]:
        """name -> (value, source) as DescribeConfigs answers."""
        entries = describe_configs(self.admin, ResourceType.TOPIC, topic)
        return {name: (entry.value, entry.source) for name, entry in entries.items()}

    def override(self, topic: str, name: str) -> str | None:
        """The topic's own value of a config, or None when it follows the default."""
        value, source = self.configs(topic)[name]
        return value if source == DYNAMIC else None

    def create(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        create_topic(self.bootstrap, name, partitions, **(config or {}))

    def alter(self, topic: str, configs: dict[str, str]) -> None:
        entries = [config_op(name, value) for name, value in configs.items()]
        alter_configs(self.admin, ResourceType.TOPIC, topic, *entries)

    def groups(self) -> list[str]:
        return [group.group_id for group in self.admin.list_consumer_groups().result().valid]

    def wait_for_group_size(self, group: str, members: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            (description,) = self.admin.describe_consumer_groups([group]).values()
            size = len(description.result(timeout=10).members)
            if size == members:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{group} has {size} members after {timeout}s, not {members}")
            time.sleep(0.1)

    def records(self, topic: str) -> int:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "topics-test"})
        try:
            total = 0
            for partition in range(self.partitions(topic)):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10, cached=False
                )
                total += high - low
            return total
        finally:
            consumer.close()


@pytest.fixture
def cluster(kafka_broker: BrokerProcess) -> Iterator[ClusterView]:
    yield ClusterView(kafka_broker.bootstrap)
    # Clients kept alive by exception reference cycles (pytest.raises) would keep
    # reconnecting to the stopped broker and log it into the next tests.
    gc.collect()


def produce_keyed(bootstrap: str, topic: str, keys: list[bytes | None]) -> None:
    """One record per key, valued value-0, value-1, ..."""
    produce(bootstrap, topic, [f"value-{n}".encode() for n in range(len(keys))], keys=keys)


def write_spec(tmp_path: Path, text: str, name: str = "topics.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def cli_command(command: str, spec: Path, bootstrap: str, *options: str) -> list[str]:
    """``onceflow topics COMMAND --file SPEC --bootstrap BOOTSTRAP OPTIONS``."""
    return [
        *(sys.executable, "-m", "onceflow", "topics", command),
        *("--file", str(spec), "--bootstrap", bootstrap, *options),
    ]


def topics_process(
    command: str, spec: Path, bootstrap: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a process to completion."""
    return subprocess.run(
        cli_command(command, spec, bootstrap, *options),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=CLI_ENV,
    )


def topics_cli(
    command: str, spec: Path, bootstrap: str, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The same through click's CliRunner, in this process (no interpreter start-up)."""
    shell = {name: None for name in os.environ if name.startswith("ONCEFLOW_")}
    result = CliRunner().invoke(
        main,
        ["topics", command, "--file", str(spec), "--bootstrap", bootstrap, *options],
        env={**shell, **(env or {})},
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["onceflow", "topics", command], result.exit_code, result.stdout, result.stderr
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
