"""Every kind of validation error in a topics file: reported with its line, all at once,
before any command touches the cluster (or without one)."""

from __future__ import annotations

from onceflow.topics.lock import LOCK_TOPIC
from tests.integration.topics_helpers import output, topics_cli, topics_process, write_spec

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
