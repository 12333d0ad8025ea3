"""``onceflow topics plan`` and ``migrate`` against a real broker: the plan output,
idempotent migrate, configs seen through DescribeConfigs, every kind of change and the
ones that cannot be made (shrinks, replication changes), the environment a refusal
names, --strict, --env and --detailed-exitcode."""

from __future__ import annotations

import pytest

from onceflow import topics
from onceflow.topics import PlanError
from onceflow.topics.lock import LOCK_TOPIC
from tests.integration.topics_helpers import (
    DEFAULT,
    DEMO_TOPICS,
    DYNAMIC,
    output,
    produce_keyed,
    topics_cli,
    topics_process,
    write_spec,
)

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
