"""``onceflow topics`` against a real onceflow broker, read back with confluent-kafka.

Every command through the CLI (plan, migrate, create, delete, repartition, reset, align),
the plan output, idempotent migrate, configs seen through DescribeConfigs, refused shrinks
and replication changes, the keyed-data warning, --strict, --env, --detailed-exitcode, the
cluster lock under concurrent runs, every kind of validation error, the Python API and the
demo's topics.yaml. The CLI runs as a real process where processes matter (the lock,
exit codes of a real run) and through click's CliRunner elsewhere, to keep the file fast.
"""

from __future__ import annotations

import gc
import logging
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigSource,
    ResourceType,
)

from onceflow import topics
from onceflow.cli import main
from onceflow.testing import BrokerProcess, unique_name
from onceflow.topics import ConfirmationRequired, PlanError, SpecError, TopicsError
from onceflow.topics.lock import LOCK_GROUP, LOCK_TOPIC
from onceflow.topics.plan import AddPartitions, AlterConfigs, CreateTopic, DeleteTopic
from tests.integration.console_script import assert_one_line_error, onceflow
from tests.kit.clients import alter_configs, config_op, create_topic, describe_configs, produce

ROOT = Path(__file__).resolve().parents[2]
DEMO_TOPICS = ROOT / "examples" / "orders" / "topics.yaml"
DYNAMIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
# The CLI must not pick up a bootstrap or environment from the shell running the tests.
CLI_ENV = {key: value for key, value in os.environ.items() if not key.startswith("ONCEFLOW_")}
KEYS_MOVE = (
    "adding partitions changes hash(key) % partitions, so keys move to other partitions "
    "and per-key order across the change is not kept"
)


# --------------------------------------------------------------------------- helpers


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


def start_topics_cli(command: str, spec: Path, bootstrap: str, *options: str) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command(command, spec, bootstrap, *options),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


class LineReader:
    """Lines of a child's pipe, read on a thread so a test can wait for one with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def wait_for(self, matches: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            self.seen.append(line)
            if matches(line):
                return line
        raise AssertionError(f"no matching line within {timeout}s; got {self.seen!r}")

    def rest(self) -> str:
        self._thread.join(30)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


# --------------------------------------------------------------------------- plan, migrate


def test_plan_prints_the_creates_and_changes_nothing(kafka_broker, cluster):
    detailed = topics_process("plan", DEMO_TOPICS, kafka_broker.bootstrap, "--detailed-exitcode")
    assert detailed.returncode == 2, output(detailed)
    lines = detailed.stdout.splitlines()
    assert lines[0] == f"plan {DEMO_TOPICS} on {kafka_broker.bootstrap}"
    assert lines[1:5] == [
        "  + orders  create: partitions=6 replication_factor=1",
        "      + cleanup.policy = delete",
        "      + min.insync.replicas = 1",
        "      + retention.ms = 604800000",
    ]
    assert "  + order-confirmations  create: partitions=6 replication_factor=1" in lines
    assert "      + retention.ms = 259200000" in lines
    assert lines[-1] == "Plan: 2 to create."

    plain = topics_process("plan", DEMO_TOPICS, kafka_broker.bootstrap)
    assert plain.returncode == 0, output(plain)
    assert plain.stdout == detailed.stdout
    # plan takes no lock and creates nothing, not even the lock topic
    assert cluster.all_topics() & {"orders", "order-confirmations", LOCK_TOPIC} == set()


def test_migrate_creates_the_topics_with_their_configs_and_is_idempotent(kafka_broker, cluster):
    first = topics_process("migrate", DEMO_TOPICS, kafka_broker.bootstrap)
    assert first.returncode == 0, output(first)
    assert "  + orders  create: partitions=6 replication_factor=1" in first.stdout
    assert first.stdout.splitlines()[-1] == "Applied: 2 to create."

    assert {"orders", "order-confirmations"} <= cluster.topics()
    expected_retention = {"orders": "604800000", "order-confirmations": "259200000"}
    for topic, retention in expected_retention.items():
        assert cluster.partitions(topic) == 6
        configs = cluster.configs(topic)
        assert configs["retention.ms"] == (retention, DYNAMIC)
        assert configs["cleanup.policy"] == ("delete", DYNAMIC)
        assert configs["min.insync.replicas"] == ("1", DYNAMIC)
        assert configs["segment.bytes"][1] == DEFAULT  # undeclared: left to the broker

    for command in ("migrate", "plan"):
        again = topics_process(command, DEMO_TOPICS, kafka_broker.bootstrap, "--detailed-exitcode")
        assert again.returncode == 0, output(again)
        assert again.stdout.splitlines()[1:] == [
            "  = orders  up to date",
            "  = order-confirmations  up to date",
            "No changes: the cluster matches the spec.",
        ]
    assert cluster.partitions("orders") == 6
    assert cluster.override("orders", "retention.ms") == "604800000"


def test_plan_shows_every_kind_of_change_and_what_cannot_be_done(kafka_broker, cluster, tmp_path):
    cluster.create("grow", 2, {"retention.ms": "1000", "max.message.bytes": "2000000"})
    cluster.create("shrink", 4)
    cluster.create("fixed", 1)
    cluster.create("same", 1, {"retention.ms": "5000"})
    spec = write_spec(
        tmp_path,
        """
        topics:
          new:
            partitions: 3
            config:
              cleanup.policy: compact
          grow:
            partitions: 5
            config:
              retention.ms: 2000
              segment.bytes: 1048576
              max.message.bytes: null     # drop the override: back to the broker default
          shrink:
            partitions: 2
          fixed:
            partitions: 1
            replication_factor: 3
          same:
            partitions: 1
            config:
              retention.ms: "5000"
        """,
    )
    plan = topics_cli("plan", spec, kafka_broker.bootstrap, "--detailed-exitcode")
    assert plan.returncode == 1, output(plan)
    assert plan.stdout.splitlines()[1:9] == [
        "  + new  create: partitions=3 replication_factor=cluster default",
        "      + cleanup.policy = compact",
        "  ~ grow  partitions: 2 → 5",
        "  ~ grow  config:",
        "      - max.message.bytes = 2000000 (back to the default)",
        "      ~ retention.ms: 1000 → 2000",
        "      ~ segment.bytes: 1073741824 → 1048576",
        "  = same  up to date",
    ]
    assert (
        "  x error: shrink: cannot shrink from 4 to 2 partitions; Kafka cannot remove "
        "partitions" in plan.stdout
    )
    assert "  x error: fixed: replication factor is 1, spec says 3; it cannot be changed" in (
        plan.stdout
    )
    assert plan.stdout.splitlines()[-1] == (
        "Plan: 1 to create, 1 to repartition, 1 to reconfigure, 2 errors."
    )

    refused = topics_cli("migrate", spec, kafka_broker.bootstrap, "--detailed-exitcode")
    assert refused.returncode == 1, output(refused)
    assert "refused: the plan has errors; nothing was changed" in refused.stderr
    assert "new" not in cluster.topics()
    assert (cluster.partitions("grow"), cluster.partitions("shrink")) == (2, 4)
    assert cluster.override("grow", "retention.ms") == "1000"
    assert cluster.override("grow", "max.message.bytes") == "2000000"

    # Without the impossible changes, migrate applies the rest (exit 2: changes were made).
    possible = write_spec(
        tmp_path,
        spec.read_text().split("  shrink:")[0] + "  same:\n    partitions: 1\n",
        "possible.yaml",
    )
    applied = topics_cli("migrate", possible, kafka_broker.bootstrap, "--detailed-exitcode")
    assert applied.returncode == 2, output(applied)
    assert applied.stdout.splitlines()[-1] == (
        "Applied: 1 to create, 1 to repartition, 1 to reconfigure."
    )
    assert cluster.partitions("new") == 3
    assert cluster.configs("new")["cleanup.policy"] == ("compact", DYNAMIC)
    assert cluster.partitions("grow") == 5
    grow = cluster.configs("grow")
    assert grow["retention.ms"] == ("2000", DYNAMIC)
    assert grow["segment.bytes"] == ("1048576", DYNAMIC)
    assert grow["max.message.bytes"][1] == DEFAULT
    assert grow["max.message.bytes"][0] != "2000000"
    # same declares no config any more: its override is left alone (only null removes one)
    assert cluster.override("same", "retention.ms") == "5000"
    settled = topics_cli("plan", possible, kafka_broker.bootstrap, "--detailed-exitcode")
    assert settled.returncode == 0, output(settled)


def test_no_command_shrinks_partitions(kafka_broker, cluster, tmp_path):
    cluster.create("events", 4)
    produce_keyed(kafka_broker.bootstrap, "events", [b"a", b"b", b"c"])
    spec = write_spec(tmp_path, "topics:\n  events:\n    partitions: 2\n")
    for command in ("plan", "migrate", "repartition"):
        result = topics_cli(command, spec, kafka_broker.bootstrap)
        assert result.returncode == 1, f"{command}: {output(result)}"
        assert "events: cannot shrink from 4 to 2 partitions" in result.stdout, command
    with pytest.raises(PlanError) as refused:
        topics.migrate(spec, kafka_broker.bootstrap)
    assert refused.value.plan.errors[0].startswith("events: cannot shrink from 4 to 2")
    message = str(refused.value)  # one line, for callers that print it (the orders demo)
    assert "\n" not in message, message
    assert message.startswith(f"{spec}: refused, nothing was changed: events: cannot shrink")
    assert cluster.partitions("events") == 4
    assert cluster.records("events") == 3


def test_a_refused_plan_names_the_environment_of_the_file_that_matches(
    kafka_broker, cluster, tmp_path
):
    """Topics made under one environment, the file applied without one: the refusal says
    which environment to choose (item 9 of issue 33: the demo's RF 3 topics)."""
    cluster.create("events", 4)
    spec = write_spec(
        tmp_path,
        """
        topics:
          events:
            partitions: 2
        environments:
          big:
            topics:
              events:
                partitions: 4
        """,
    )
    with pytest.raises(PlanError) as refused:
        topics.migrate(spec, kafka_broker.bootstrap)
    assert str(refused.value).endswith(
        "the file's environment 'big' matches the cluster: choose it "
        "(--env big, ONCEFLOW_ENV=big, env='big')"
    ), str(refused.value)
    result = topics_cli("migrate", spec, kafka_broker.bootstrap)
    assert result.returncode == 1, output(result)
    assert "hint: the file's environment 'big' matches the cluster" in result.stdout
    assert topics.migrate(spec, kafka_broker.bootstrap, env="big").errors == []


# --------------------------------------------------------------------------- align, repartition


def test_align_changes_configs_only(kafka_broker, cluster, tmp_path):
    cluster.create("orders", 2, {"retention.ms": "1000", "max.message.bytes": "2000000"})
    spec = write_spec(
        tmp_path,
        """
        topics:
          orders:
            partitions: 4
            config:
              retention.ms: 5000
              cleanup.policy: [compact, delete]
              max.message.bytes: null
          missing:
            partitions: 1
        """,
    )
    result = topics_cli("align", spec, kafka_broker.bootstrap, "--detailed-exitcode")
    assert result.returncode == 2, output(result)
    assert result.stdout.splitlines()[1:] == [
        "  ~ orders  config:",
        "      ~ cleanup.policy: delete → compact,delete",
        "      - max.message.bytes = 2000000 (back to the default)",
        "      ~ retention.ms: 1000 → 5000",
        "  · missing: does not exist (create it with migrate)",
        "Plan: 1 to reconfigure.",
        "Applied: 1 to reconfigure.",
    ]
    configs = cluster.configs("orders")
    assert configs["retention.ms"] == ("5000", DYNAMIC)
    assert configs["cleanup.policy"] == ("compact,delete", DYNAMIC)
    assert configs["max.message.bytes"][1] == DEFAULT
    assert cluster.partitions("orders") == 2  # align never adds partitions
    assert "missing" not in cluster.topics()  # nor creates topics

    again = topics_cli("align", spec, kafka_broker.bootstrap, "--detailed-exitcode")
    assert again.returncode == 0, output(again)


def test_repartition_adds_partitions_only_and_warns_about_keyed_data(
    kafka_broker, cluster, tmp_path
):
    cluster.create("keyed", 2, {"retention.ms": "1000"})
    cluster.create("unkeyed", 2)
    cluster.create("empty", 2)
    cluster.create("declared", 1)
    produce_keyed(
        kafka_broker.bootstrap, "keyed", [f"customer-{n % 3}".encode() for n in range(10)]
    )
    produce_keyed(kafka_broker.bootstrap, "unkeyed", [None] * 4)
    produce_keyed(kafka_broker.bootstrap, "declared", [None] * 2)
    spec = write_spec(
        tmp_path,
        """
        topics:
          keyed:
            partitions: 4
            config:
              retention.ms: 9000
          unkeyed:
            partitions: 3
          empty:
            partitions: 3
            keyed_by: customer
          declared:                 # its newest records carry no key, but it says it is keyed
            partitions: 2
            keyed_by: account
          missing:
            partitions: 1
        """,
    )
    warnings = [
        f"  ! warning: keyed holds keyed data (10 records): {KEYS_MOVE}",
        f"  ! warning: declared holds keyed data (2 records): {KEYS_MOVE}",
    ]

    plan = topics_cli("plan", spec, kafka_broker.bootstrap)
    assert plan.returncode == 0, output(plan)
    assert [line for line in plan.stdout.splitlines() if "! warning" in line] == [
        f"{warning} (records already written stay where they are)" for warning in warnings
    ]  # none for unkeyed records nor for an empty topic
    assert cluster.groups() == []  # sampling the keys left no consumer group behind

    result = topics_cli("repartition", spec, kafka_broker.bootstrap)
    assert result.returncode == 0, output(result)
    lines = result.stdout.splitlines()
    assert lines[1:5] == [
        "  ~ keyed  partitions: 2 → 4",
        "  ~ unkeyed  partitions: 2 → 3",
        "  ~ empty  partitions: 2 → 3",
        "  ~ declared  partitions: 1 → 2",
    ]
    assert "  · missing: does not exist (create it with migrate)" in lines
    assert [line for line in lines if "! warning" in line] == [
        f"{warning} (records already written stay where they are)" for warning in warnings
    ]
    assert lines[-1] == "Applied: 4 to repartition."
    partitions = [cluster.partitions(name) for name in ("keyed", "unkeyed", "empty", "declared")]
    assert partitions == [4, 3, 3, 2]
    assert cluster.override("keyed", "retention.ms") == "1000"  # configs are align's job
    assert "missing" not in cluster.topics()
    assert cluster.records("keyed") == 10


def test_create_leaves_existing_topics_alone(kafka_broker, cluster):
    cluster.create("orders", 2, {"retention.ms": "1000"})
    result = topics_cli("create", DEMO_TOPICS, kafka_broker.bootstrap, "--detailed-exitcode")
    assert result.returncode == 2, output(result)
    assert "  · orders: exists (create leaves existing topics alone)" in result.stdout
    assert "  + order-confirmations  create: partitions=6 replication_factor=1" in result.stdout
    assert result.stdout.splitlines()[-1] == "Applied: 1 to create."
    assert cluster.partitions("orders") == 2
    assert cluster.override("orders", "retention.ms") == "1000"
    assert cluster.partitions("order-confirmations") == 6
    assert cluster.override("order-confirmations", "retention.ms") == "259200000"


# --------------------------------------------------------------------------- delete, reset


def test_delete_and_reset_need_yes_and_do_what_they_say(kafka_broker, cluster):
    bootstrap = kafka_broker.bootstrap
    assert topics_cli("migrate", DEMO_TOPICS, bootstrap).returncode == 0
    cluster.create("other", 1)
    produce_keyed(bootstrap, "orders", [b"store-1"] * 5)
    cluster.alter("orders", {"retention.ms": "1000"})  # drift that reset must undo
    for command in ("delete", "reset"):
        refused = topics_cli(command, DEMO_TOPICS, bootstrap)
        assert refused.returncode == 1, output(refused)
        assert f"{command} deletes topics and their data; confirm with --yes" in refused.stderr
        assert refused.stdout == ""
    assert cluster.records("orders") == 5

    reset = topics_cli("reset", DEMO_TOPICS, bootstrap, "--yes")
    assert reset.returncode == 0, output(reset)
    assert reset.stdout.splitlines()[1:3] == [
        "  - orders  delete (6 partitions, all records lost)",
        "  + orders  create: partitions=6 replication_factor=1",
    ]
    assert reset.stdout.splitlines()[-1] == "Applied: 2 to delete, 2 to create."
    assert cluster.records("orders") == 0
    assert cluster.partitions("orders") == 6
    assert cluster.override("orders", "retention.ms") == "604800000"

    delete = topics_cli("delete", DEMO_TOPICS, bootstrap, "-y")
    assert delete.returncode == 0, output(delete)
    assert delete.stdout.splitlines()[1:3] == [
        "  - orders  delete (6 partitions, all records lost)",
        "  - order-confirmations  delete (6 partitions, all records lost)",
    ]
    assert cluster.topics() == {"other"}  # undeclared topics are never deleted

    again = topics_cli("delete", DEMO_TOPICS, bootstrap, "--yes", "--detailed-exitcode")
    assert again.returncode == 0, output(again)
    assert "  · orders: does not exist" in again.stdout


# --------------------------------------------------------------------------- --strict, --env


def test_strict_reports_topics_that_are_not_declared(kafka_broker, cluster, tmp_path):
    cluster.create("legacy", 1)
    spec = write_spec(tmp_path, "topics:\n  orders:\n    partitions: 2\n")
    bootstrap = kafka_broker.bootstrap

    lenient = topics_cli("plan", spec, bootstrap)
    assert lenient.returncode == 0, output(lenient)
    assert "legacy" not in lenient.stdout

    strict = topics_cli("plan", spec, bootstrap, "--strict", "--detailed-exitcode")
    assert strict.returncode == 1, output(strict)
    assert "  x error: legacy: exists on the cluster but is not declared (--strict)" in (
        strict.stdout
    )
    assert strict.stdout.count("x error") == 1  # internal topics (__...) are not reported

    refused = topics_cli("migrate", spec, bootstrap, "--strict")
    assert refused.returncode == 1, output(refused)
    assert "refused: the plan has errors; nothing was changed" in refused.stderr
    assert cluster.topics() == {"legacy"}

    assert topics_cli("migrate", spec, bootstrap).returncode == 0
    assert cluster.topics() == {"legacy", "orders"}
    still = topics_cli("plan", spec, bootstrap, "--strict")
    assert still.returncode == 1, output(still)
    assert "not declared" in still.stdout and LOCK_TOPIC not in still.stdout


def test_env_selects_per_environment_overrides(kafka_broker, cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """
        defaults:
          config:
            retention.ms: 86400000
        topics:
          orders:
            partitions: 2
            config:
              cleanup.policy: delete
        environments:
          staging:
            topics:
              orders:
                partitions: 4
                config:
                  retention.ms: 172800000
          production:
            defaults:
              replication_factor: 3
        """,
    )
    bootstrap = kafka_broker.bootstrap
    assert topics_cli("migrate", spec, bootstrap).returncode == 0
    assert cluster.partitions("orders") == 2
    assert cluster.override("orders", "retention.ms") == "86400000"

    plan = topics_cli("plan", spec, bootstrap, "--env", "staging", "--detailed-exitcode")
    assert plan.returncode == 2, output(plan)
    assert plan.stdout.splitlines() == [
        f"plan {spec} (env staging) on {bootstrap}",
        "  ~ orders  partitions: 2 → 4",
        "  ~ orders  config:",
        "      ~ retention.ms: 86400000 → 172800000",
        "Plan: 1 to repartition, 1 to reconfigure.",
    ]
    staging = topics_cli("migrate", spec, bootstrap, "--env", "staging")
    assert staging.returncode == 0, output(staging)
    assert cluster.partitions("orders") == 4
    assert cluster.configs("orders")["retention.ms"] == ("172800000", DYNAMIC)
    assert cluster.configs("orders")["cleanup.policy"] == ("delete", DYNAMIC)

    from_variable = topics_cli(
        "plan", spec, bootstrap, "--detailed-exitcode", env={"ONCEFLOW_ENV": "staging"}
    )
    assert from_variable.returncode == 0, output(from_variable)
    assert "(env staging)" in from_variable.stdout

    production = topics_cli("plan", spec, bootstrap, "--env", "production")
    assert production.returncode == 1, output(production)
    assert "orders: replication factor is 1, spec says 3" in production.stdout

    unknown = topics_cli("plan", spec, bootstrap, "--env", "qa")
    assert unknown.returncode == 1, output(unknown)
    assert (
        f"{spec}:9: environments: unknown environment 'qa' (known: production, staging)"
        in unknown.stderr
    )


# --------------------------------------------------------------------------- validation

# (what is wrong, the topic "bad" as YAML under topics:, its line in the file, the message)
VALIDATION_CASES = [
    (
        "unknown topic key",
        "  bad:\n    partitions: 1\n    partitons: 3\n",
        6,
        "topics.bad.partitons: unknown key 'partitons' (allowed: partitions,",
    ),
    (
        "zero partitions",
        "  bad:\n    partitions: 0\n",
        5,
        "topics.bad.partitions: partitions must be at least 1, got 0",
    ),
    (
        "negative partitions",
        "  bad:\n    partitions: -2\n",
        5,
        "topics.bad.partitions: partitions must be at least 1, got -2",
    ),
    (
        "partitions of the wrong type",
        "  bad:\n    partitions: six\n",
        5,
        "topics.bad.partitions: partitions must be an integer, got string 'six'",
    ),
    (
        "zero replication factor",
        "  bad:\n    partitions: 1\n    replication_factor: 0\n",
        6,
        "topics.bad.replication_factor: replication_factor must be at least 1, got 0",
    ),
    (
        "unknown config",
        "  bad:\n    partitions: 1\n    config:\n      retention.msec: 1000\n",
        7,
        "topics.bad.config.retention.msec: unknown topic config 'retention.msec' "
        "(did you mean retention.ms?)",
    ),
    (
        "broker setting as a topic config",
        "  bad:\n    partitions: 1\n    config:\n      log.retention.hours: 5\n",
        7,
        "unknown topic config 'log.retention.hours' (a broker setting, not a topic config)",
    ),
    (
        "config value of the wrong type",
        "  bad:\n    partitions: 1\n    config:\n      retention.ms: one week\n",
        7,
        "topics.bad.config.retention.ms: retention.ms must be an integer, got string 'one week'",
    ),
    (
        "config value Kafka refuses",
        "  bad:\n    partitions: 1\n    config:\n      cleanup.policy: forever\n",
        7,
        "topics.bad.config.cleanup.policy: ",
    ),
    ("invalid YAML", "  bad: {partitions: [1\n", 5, "invalid YAML"),
]


def test_every_validation_error_fails_before_touching_the_cluster(kafka_broker, cluster, tmp_path):
    good = "topics:\n  good:\n    partitions: 1\n"  # lines 1-3; "bad" starts on line 4
    for what, bad, line, message in VALIDATION_CASES:
        spec = write_spec(tmp_path, good + bad, f"{what.replace(' ', '-')}.yaml")
        # plan and migrate load the file alike; the first case checks plan as well
        commands = ("migrate", "plan") if what == VALIDATION_CASES[0][0] else ("migrate",)
        for command in commands:
            result = topics_cli(command, spec, kafka_broker.bootstrap, "--detailed-exitcode")
            assert result.returncode == 1, f"{what}: {output(result)}"
            assert result.stderr.splitlines()[0] == "invalid topics file (1 problem):", what
            assert f"  {spec}:{line}: " in result.stderr, f"{what}: {output(result)}"
            assert message in result.stderr, f"{what}: {output(result)}"
            assert result.stdout == "", what
    # nothing created, not even the lock topic: no command got as far as the cluster
    assert cluster.all_topics() & {"good", "bad", LOCK_TOPIC} == set()

    # every problem of a file at once, each with its line
    spec = write_spec(
        tmp_path,
        """
        topics:
          good:
            partitions: 1
          a:
            partitions: 0
          b:
            partitions: 1
            config:
              retention.msec: 1
          c:
            partitons: 2
        """,
    )
    result = topics_cli("migrate", spec, kafka_broker.bootstrap)
    assert result.returncode == 1, output(result)
    assert result.stderr.splitlines() == [
        "invalid topics file (4 problems):",
        f"  {spec}:5: topics.a.partitions: partitions must be at least 1, got 0",
        f"  {spec}:9: topics.b.config.retention.msec: unknown topic config 'retention.msec' "
        "(did you mean retention.ms?)",
        f"  {spec}:11: topics.c.partitons: unknown key 'partitons' (allowed: partitions, "
        "replication_factor, config, keyed_by, description)",
        f"  {spec}:10: topics.c: partitions is required (here or under defaults)",
    ]
    # and without any cluster to talk to
    nowhere = topics_process("migrate", spec, "127.0.0.1:9", "--lock-timeout", "1")
    assert nowhere.returncode == 1, output(nowhere)
    assert nowhere.stderr == result.stderr


# --------------------------------------------------------------------------- the lock

HOLDER_SCRIPT = """
import sys
from onceflow import topics
from onceflow.cli import main

def pause_inside_the_lock(plan):
    print("planned", len(plan.changes), flush=True)
    sys.stdin.readline()

plan = topics.run("migrate", sys.argv[1], sys.argv[2], on_plan=pause_inside_the_lock)
print("applied" if plan.applied else "not applied", flush=True)
"""


def test_a_concurrent_migrate_waits_for_the_holder_or_gives_up_naming_it(kafka_broker, cluster):
    bootstrap = kafka_broker.bootstrap
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, str(DEMO_TOPICS), bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )
    waiter = None
    try:
        assert holder.stdout is not None and holder.stdin is not None
        holder_out = LineReader(holder.stdout)
        holder_out.wait_for(lambda line: line == "planned 2\n")  # holds the lock, applied nothing
        named = f"pid {holder.pid} (onceflow topics migrate {DEMO_TOPICS})"

        impatient = topics_process("migrate", DEMO_TOPICS, bootstrap, "--lock-timeout", "1")
        assert impatient.returncode == 1, output(impatient)
        assert "error: the topics lock is held by " in impatient.stderr
        assert named in impatient.stderr
        assert "gave up after 1 s (--lock-timeout)" in impatient.stderr
        assert impatient.stdout == ""  # it planned nothing
        assert cluster.topics() == set()
        # and it left the lock group: a member left behind would stall every rebalance, so
        # the next runner would wait for its session to time out (10 s) before its turn
        cluster.wait_for_group_size(LOCK_GROUP, 1, timeout=5.0)

        waiter = start_topics_cli("migrate", DEMO_TOPICS, bootstrap, "--lock-timeout", "60")
        assert waiter.stderr is not None and waiter.stdout is not None
        waiter_err = LineReader(waiter.stderr)
        waiting = waiter_err.wait_for(lambda line: line.startswith("waiting up to 60 s"))
        assert named in waiting
        assert cluster.topics() == set()

        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(60) == 0, holder.stderr.read() if holder.stderr else ""
        assert holder_out.rest().endswith("applied\n")

        waiter_stdout = waiter.communicate(timeout=60)[0]
        assert waiter.returncode == 0, waiter_stdout + waiter_err.rest()
        # it planned only after the holder had applied: nothing was left to do
        assert waiter_stdout.splitlines()[-1] == "No changes: the cluster matches the spec."
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert cluster.partitions("orders") == 6
    assert cluster.override("orders", "retention.ms") == "604800000"


def test_two_migrates_started_together_apply_once(kafka_broker, cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """
        topics:
          a: {partitions: 3, config: {retention.ms: 1000}}
          b: {partitions: 2}
        """,
    )
    runs = [start_topics_cli("migrate", spec, kafka_broker.bootstrap) for _ in range(2)]
    results = [run.communicate(timeout=90) for run in runs]
    for run, (stdout, stderr) in zip(runs, results, strict=True):
        assert run.returncode == 0, stdout + stderr
    endings = sorted(stdout.splitlines()[-1] for stdout, _ in results)
    # one created both topics; the other planned after it and found nothing to do
    assert endings == ["Applied: 2 to create.", "No changes: the cluster matches the spec."]
    assert (cluster.partitions("a"), cluster.partitions("b")) == (3, 2)
    assert cluster.override("a", "retention.ms") == "1000"


# --------------------------------------------------------------------------- Python API


def test_python_api(kafka_broker, cluster, caplog):
    bootstrap = kafka_broker.bootstrap
    spec = {
        "topics": {
            "payments": {"partitions": 2, "keyed_by": "account", "config": {"retention.ms": 60000}},
            "audit": {"partitions": 1, "config": {"cleanup.policy": "compact"}},
        }
    }
    preview = topics.plan(spec, bootstrap)
    assert [change.topic.name for change in preview.of(CreateTopic)] == ["payments", "audit"]
    assert preview.exit_code(detailed=True) == 2 and not preview.applied
    assert cluster.topics() == set()

    applied = topics.migrate(spec, bootstrap)
    assert applied.applied and applied.summary() == "Applied: 2 to create."
    assert cluster.partitions("payments") == 2
    assert cluster.configs("payments")["retention.ms"] == ("60000", DYNAMIC)
    assert cluster.configs("audit")["cleanup.policy"] == ("compact", DYNAMIC)
    again = topics.migrate(spec, bootstrap)
    assert not again.has_changes and again.unchanged == ["payments", "audit"]

    produce_keyed(bootstrap, "payments", [b"account-1", b"account-2"])
    grown = "topics:\n  payments:\n    partitions: 4\n    config:\n      retention.ms: 120000\n"
    with caplog.at_level(logging.WARNING, logger="onceflow.topics"):
        changed = topics.migrate(grown, bootstrap)  # YAML text works as well
    assert [type(change) for change in changed.changes] == [AddPartitions, AlterConfigs]
    assert "payments holds keyed data (2 records)" in caplog.text
    assert cluster.partitions("payments") == 4
    assert cluster.override("payments", "retention.ms") == "120000"

    with pytest.raises(SpecError) as invalid:
        topics.migrate({"topics": {"bad": {"partitions": 0}}}, bootstrap)
    assert str(invalid.value) == (
        "<dict>: topics.bad.partitions: partitions must be at least 1, got 0"
    )
    with pytest.raises(ConfirmationRequired):
        topics.run("delete", spec, bootstrap)
    deleted = topics.run("delete", spec, bootstrap, yes=True)
    assert [change.name for change in deleted.of(DeleteTopic)] == ["payments", "audit"]
    assert cluster.topics() == set()
    del invalid


def test_an_unreachable_cluster_is_a_clear_error():
    """Commands that lock reported a bare TimeoutError traceback here; now all say why."""
    nowhere = "127.0.0.1:9"  # the discard port: nothing listens there
    for command in ("plan", "migrate"):
        with pytest.raises(TopicsError, match=r"^cannot reach 127\.0\.0\.1:9: ") as failure:
            topics.run(command, DEMO_TOPICS, nowhere, yes=True, request_timeout=1.0)
        del failure


# --------------------------------------------------------------------------- the demo


def test_the_demo_applies_its_topics_file_with_migrate(kafka_broker, cluster):
    """make demo runs examples/orders/demo.py, whose apply_topics migrates topics.yaml."""
    apply_topics = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('demo', sys.argv[1])\n"
        "demo = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(demo)\n"
        "demo.apply_topics(sys.argv[2])\n"
    )
    demo = ROOT / "examples" / "orders" / "demo.py"
    for _ in range(2):  # the demo's state survives between runs: applying again is a no-op
        result = subprocess.run(
            [sys.executable, "-c", apply_topics, str(demo), kafka_broker.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=CLI_ENV,
        )
        assert result.returncode == 0, output(result)
    assert cluster.topics() == {"orders", "order-confirmations"}
    assert cluster.partitions("orders") == 6
    assert cluster.override("orders", "retention.ms") == "604800000"
    assert cluster.override("order-confirmations", "retention.ms") == "259200000"
    check = topics_cli("plan", DEMO_TOPICS, kafka_broker.bootstrap, "--detailed-exitcode")
    assert check.returncode == 0, output(check)


# --------------------------------------------------- one topic, as kafka-topics does it


def test_create_alter_and_delete_one_topic_like_kafka_topics(kafka_module_broker):
    """kafka-topics' --create/--alter/--delete ergonomics beside the topics file: name a
    topic, give --partitions, --replication-factor and --config (the installed script)."""
    bootstrap = ("--bootstrap", kafka_module_broker.bootstrap)
    view = ClusterView(kafka_module_broker.bootstrap)
    name = unique_name("orders2")
    created = onceflow(
        "topics", "create", name, "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact", *bootstrap,
    )  # fmt: skip
    assert (created.returncode, created.stderr) == (0, ""), output(created)
    assert created.stdout == f"created topic {name}: 3 partitions, replication factor 1\n"
    assert view.partitions(name) == 3
    assert view.override(name, "retention.ms") == "3600000"
    assert view.override(name, "cleanup.policy") == "compact"

    again = onceflow("topics", "create", name, "--partitions", "3", *bootstrap)
    assert assert_one_line_error(again, 1) == f"error: topic '{name}' already exists"
    tolerated = onceflow("topics", "create", name, "--if-not-exists", *bootstrap)
    assert tolerated.returncode == 0, output(tolerated)
    assert tolerated.stdout == f"topic {name} already exists: left as it is\n"

    defaults = unique_name("defaults")  # the broker's num.partitions, as kafka-topics does
    made = onceflow("topics", "create", defaults, *bootstrap)
    assert made.stdout == f"created topic {defaults}: 1 partition, replication factor 1\n"
    for options, code, message in [
        (["--config", "no.such.config=1"], 2, "INVALID_CONFIG"),
        (["--replication-factor", "3"], 2, "INVALID_REPLICATION_FACTOR"),
    ]:
        refused = onceflow("topics", "create", unique_name("bad"), *options, *bootstrap)
        assert message in assert_one_line_error(refused, code), options

    grown = onceflow("topics", "alter", name, "--partitions", "5", *bootstrap)
    assert grown.returncode == 0, output(grown)
    assert grown.stdout == f"topic {name} now has 5 partitions\n"
    assert "per-key order" in grown.stderr  # Kafka warns about keyed data too
    assert view.partitions(name) == 5
    shrink = onceflow("topics", "alter", name, "--partitions", "2", *bootstrap)
    assert "INVALID_PARTITIONS" in assert_one_line_error(shrink, 2)

    unconfirmed = onceflow("topics", "delete", name, *bootstrap)
    assert assert_one_line_error(unconfirmed, 1) == (
        f"error: deleting topic {name} deletes its data: add --yes to do it"
    )
    assert name in view.topics()
    deleted = onceflow("topics", "delete", name, defaults, "--yes", *bootstrap)
    assert deleted.returncode == 0, output(deleted)
    assert deleted.stdout == f"deleted topic {name}\ndeleted topic {defaults}\n"
    assert not {name, defaults} & view.topics()

    for command in (["delete", "--yes"], ["alter", "--partitions", "9"]):
        missing = onceflow("topics", command[0], name, *command[1:], *bootstrap)
        assert assert_one_line_error(missing, 1) == f"error: topic '{name}' does not exist"
        tolerated = onceflow("topics", command[0], name, *command[1:], "--if-exists", *bootstrap)
        assert (tolerated.returncode, tolerated.stderr) == (0, ""), output(tolerated)


def test_one_topic_options_and_topics_file_options_do_not_mix(tmp_path):
    spec = write_spec(tmp_path, "topics:\n  a:\n    partitions: 1\n")
    for args, message in [
        (["create", "--partitions", "3"], "--partitions needs a TOPIC"),
        (["create", "t", "--file", str(spec)], "--file applies to the topics file"),
        (["delete", "--if-exists"], "--if-exists needs a TOPIC"),
        (["create", "t", "--config", "novalue"], "expected KEY=VALUE, got 'novalue'"),
        (["alter", "t"], "Missing option '--partitions'"),
    ]:
        result = onceflow("topics", *args, "--bootstrap", "127.0.0.1:9")
        assert result.returncode == 2, output(result)
        assert message in result.stderr, output(result)
