"""The Python API of onceflow.topics (plan, migrate, run, its errors) against a real
broker and an unreachable one, and the orders demo applying its topics.yaml."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from onceflow import topics
from onceflow.topics import ConfirmationRequired, SpecError, TopicsError
from onceflow.topics.plan import AddPartitions, AlterConfigs, CreateTopic, DeleteTopic
from tests.integration.topics_helpers import (
    CLI_ENV,
    DEMO_TOPICS,
    DYNAMIC,
    ROOT,
    output,
    produce_keyed,
    topics_cli,
)

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
