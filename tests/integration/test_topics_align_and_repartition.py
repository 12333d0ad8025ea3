"""``onceflow topics align``, ``repartition`` and ``create`` against a real broker: each
applies one kind of change only, and repartition warns about keyed data."""

from __future__ import annotations

from tests.integration.topics_helpers import (
    DEFAULT,
    DEMO_TOPICS,
    DYNAMIC,
    output,
    produce_keyed,
    topics_cli,
    write_spec,
)

KEYS_MOVE = (
    "adding partitions changes hash(key) % partitions, so keys move to other partitions "
    "and per-key order across the change is not kept"
)


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
