"""One topic at a time, as kafka-topics does it: ``onceflow topics create``, ``alter`` and
``delete`` with a topic name (the installed script), and how their options and the
topics file's do not mix."""

from __future__ import annotations

from onceflow.testing import unique_name
from tests.integration.console_script import assert_one_line_error, onceflow
from tests.integration.topics_helpers import ClusterView, output, write_spec

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
