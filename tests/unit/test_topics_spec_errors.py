"""topics.yaml validation (no broker needed): every kind of problem, reported with its
line, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.topics.spec import SpecError, load
from tests.unit.topics_spec_helpers import problems, write

# --------------------------------------------------------------------------- errors with lines


def test_unknown_keys_at_every_level_with_lines(tmp_path):
    found = problems(
        tmp_path,
        """
        topics:
          orders:
            partitions: 6
            replicas: 3
        extra: 1
        environments:
          production:
            overrides: {}
            topics:
              orders:
                keyed_by: store
        """,
    )
    path = str(tmp_path / "topics.yaml")
    assert f"{path}:4: topics.orders.replicas: unknown key 'replicas'" in found[1]
    assert found[0].startswith(f"{path}:5: extra: unknown key 'extra'")
    assert any(p.startswith(f"{path}:8: environments.production.overrides: unknown") for p in found)
    assert any(
        p.startswith(f"{path}:11: environments.production.topics.orders.keyed_by: unknown")
        for p in found
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "partitions must be at least 1, got 0"),
        ("-3", "partitions must be at least 1, got -3"),
        ('"6"', "partitions must be an integer, got string '6'"),
        ("6.5", "partitions must be an integer, got number 6.5"),
        ("true", "partitions must be an integer, got boolean True"),
        ("null", "partitions must be an integer, got null None"),
    ],
)
def test_bad_partition_counts(tmp_path, value, message):
    found = problems(
        tmp_path, f"topics:\n  orders:\n    replication_factor: 1\n    partitions: {value}\n"
    )
    assert found == [f"{tmp_path / 'topics.yaml'}:4: topics.orders.partitions: {message}"]


def test_bad_replication_factor(tmp_path):
    found = problems(tmp_path, "topics:\n  t:\n    partitions: 1\n    replication_factor: 0\n")
    assert found == [
        f"{tmp_path / 'topics.yaml'}:4: topics.t.replication_factor: "
        "replication_factor must be at least 1, got 0"
    ]


def test_unknown_configs_with_a_suggestion(tmp_path):
    found = problems(
        tmp_path,
        """
        topics:
          t:
            partitions: 1
            config:
              retention.msec: 1000
              log.retention.hours: 5
        """,
    )
    path = tmp_path / "topics.yaml"
    assert found == [
        f"{path}:5: topics.t.config.retention.msec: unknown topic config 'retention.msec' "
        "(did you mean retention.ms?)",
        f"{path}:6: topics.t.config.log.retention.hours: unknown topic config "
        "'log.retention.hours' (a broker setting, not a topic config)",
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("retention.ms: one day", "retention.ms must be an integer, got string 'one day'"),
        ("retention.ms: true", "retention.ms must be an integer, got boolean True"),
        ("retention.ms: 1.5", "retention.ms must be an integer, got number 1.5"),
        ("segment.bytes: 4294967296", "4294967296 is out of range for segment.bytes"),
        ("preallocate: 3", "preallocate must be true or false, got integer 3"),
        ("compression.type: 5", "compression.type must be a string, got integer 5"),
        ("cleanup.policy: {a: 1}", "cleanup.policy must be a list or string, got mapping"),
        ("cleanup.policy: forever", "must be one of delete, compact"),
        ("min.insync.replicas: 0", "must be at least 1"),
        ("min.cleanable.dirty.ratio: half", "must be a number, got string 'half'"),
    ],
)
def test_wrong_config_value_types(tmp_path, line, message):
    found = problems(tmp_path, f"topics:\n  t:\n    partitions: 1\n    config:\n      {line}\n")
    assert len(found) == 1
    name = line.split(":")[0]
    assert found[0].startswith(f"{tmp_path / 'topics.yaml'}:5: topics.t.config.{name}: ")
    assert message in found[0]


def test_kafka_only_configs_are_known(tmp_path):
    spec = load(
        {"topics": {"t": {"partitions": 1, "config": {"message.downconversion.enable": False}}}}
    )
    assert spec.topics["t"].config == {"message.downconversion.enable": "false"}


def test_every_problem_is_reported_at_once(tmp_path):
    found = problems(
        tmp_path,
        """
        topics:
          a:
            partitions: 0
          b:
            partitions: 2
            config:
              nope: 1
          c:
            replication_factor: 1
        """,
    )
    assert [p.split(": ")[0].rsplit(":", 1)[1] for p in found] == ["3", "7", "8"]
    assert "partitions is required" in found[2]


def test_structural_errors(tmp_path):
    assert "declares no 'topics'" in problems(tmp_path, "defaults: {}\n")[0]
    assert "declares no 'topics'" in problems(tmp_path, "")[0]
    assert "expected a mapping, got list" in problems(tmp_path, "topics: [a, b]\n")[0]
    assert (
        "duplicate key"
        in problems(tmp_path, "topics:\n  a: {partitions: 1}\n  a: {partitions: 2}\n")[0]
    )
    bad_name = problems(tmp_path, "topics:\n  'a b': {partitions: 1}\n")[0]
    assert ":2: topics.a b: topic names are" in bad_name
    assert "version" in problems(tmp_path, "version: 2\ntopics: {a: {partitions: 1}}\n")[0]


def test_invalid_yaml_has_a_line(tmp_path):
    found = problems(tmp_path, "topics:\n  a:\n    partitions: [1\n  b: 2\n")
    assert found[0].startswith(f"{tmp_path / 'topics.yaml'}:4: invalid YAML")


def test_environment_errors(tmp_path):
    text = """
        topics:
          a:
            partitions: 1
            replication_factor: 1
            config: {min.insync.replicas: 1}
        environments:
          production:
            defaults:
              config: {min.insync.replicas: 2}
            topics:
              ghost: {partitions: 1}
        """
    found = problems(tmp_path, text)
    assert found == [
        f"{tmp_path / 'topics.yaml'}:11: environments.production.topics.ghost: "
        "topic 'ghost' is not declared under 'topics'"
    ]
    found = problems(tmp_path, "topics: {a: {partitions: 1}}\nenvironments: {prod: {}}\n", "qa")
    assert found == [
        f"{tmp_path / 'topics.yaml'}:2: environments: unknown environment 'qa' (known: prod)"
    ]


def test_min_insync_replicas_above_replication_in_an_environment(tmp_path):
    text = """
        topics:
          a:
            partitions: 1
            replication_factor: 1
        environments:
          production:
            defaults:
              config: {min.insync.replicas: 2}
        """
    assert load(write(tmp_path, text)).topics["a"].replication_factor == 1
    found = problems(tmp_path, text, env="production")
    assert "min.insync.replicas=2 is larger than the replication factor 1" in found[0]
    assert "in environment 'production'" in found[0]


def test_dict_errors_name_the_path():
    with pytest.raises(SpecError) as caught:
        load({"topics": {"a": {"partitions": -1}}})
    assert str(caught.value) == "<dict>: topics.a.partitions: partitions must be at least 1, got -1"


def test_missing_file():
    with pytest.raises(SpecError, match="cannot read"):
        load(Path("/nonexistent/topics.yaml"))
