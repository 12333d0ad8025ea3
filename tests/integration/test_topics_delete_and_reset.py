"""``onceflow topics delete`` and ``reset`` against a real broker: both need --yes,
reset recreates the declared topics empty, and undeclared topics are never deleted."""

from __future__ import annotations

from tests.integration.topics_helpers import DEMO_TOPICS, output, produce_keyed, topics_cli

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
