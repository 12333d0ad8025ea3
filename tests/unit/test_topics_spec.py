"""topics.yaml loading and validation, and the planner's diff (no broker needed)."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from onceflow.topics.plan import (
    ActualConfig,
    ActualTopic,
    AddPartitions,
    AlterConfigs,
    ClusterState,
    ConfigChange,
    CreateTopic,
    DeleteTopic,
    diff,
    render,
)
from onceflow.topics.spec import SpecError, load

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders" / "topics.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topics.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str, env: str | None = None) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load(path, env)
    return [str(problem) for problem in caught.value.problems]


# --------------------------------------------------------------------------- loading


def test_the_basic_shape_from_the_issue(tmp_path):
    spec = load(
        write(
            tmp_path,
            """
            topics:
              orders:
                partitions: 6
                replication_factor: 1
                config:
                  retention.ms: 86400000
                  cleanup.policy: delete
            """,
        )
    )
    (orders,) = spec
    assert (orders.name, orders.partitions, orders.replication_factor) == ("orders", 6, 1)
    assert orders.config == {"retention.ms": "86400000", "cleanup.policy": "delete"}
    assert spec.source.endswith("topics.yaml")


def test_dict_yaml_text_and_path_string_give_the_same_spec(tmp_path):
    data = {"topics": {"a": {"partitions": 3, "config": {"cleanup.policy": ["compact", "delete"]}}}}
    text = 'topics:\n  a:\n    partitions: 3\n    config: {cleanup.policy: "compact,delete"}\n'
    path = write(tmp_path, text)
    specs = [load(data), load(text), load(str(path)), load(path)]
    assert {s.topics["a"].config["cleanup.policy"] for s in specs} == {"compact,delete"}
    assert [s.source for s in specs[:2]] == ["<dict>", "<yaml>"]


def test_values_are_normalized_to_kafka_strings(tmp_path):
    spec = load(
        {
            "topics": {
                "t": {
                    "partitions": 1,
                    "config": {
                        "retention.ms": "86400000",  # digits in a string are fine
                        "segment.bytes": 1_048_576,
                        "preallocate": True,
                        "min.cleanable.dirty.ratio": 0.25,
                        "retention.bytes": -1,
                    },
                }
            }
        }
    )
    assert spec.topics["t"].config == {
        "retention.ms": "86400000",
        "segment.bytes": "1048576",
        "preallocate": "true",
        "min.cleanable.dirty.ratio": "0.25",
        "retention.bytes": "-1",
    }


def test_environment_overrides_defaults_then_topic(tmp_path):
    path = write(
        tmp_path,
        """
        defaults:
          replication_factor: 1
          config:
            retention.ms: 1000
        topics:
          orders:
            partitions: 6
            config:
              cleanup.policy: delete
          audit:
            partitions: 1
            replication_factor: 1
        environments:
          production:
            defaults:
              replication_factor: 3
              config:
                min.insync.replicas: 2
            topics:
              orders:
                partitions: 12
                config:
                  retention.ms: null
          staging: {}
        """,
    )
    base = load(path)
    assert base.topics["orders"].replication_factor == 1
    assert base.topics["orders"].partitions == 6
    assert base.topics["orders"].config == {"retention.ms": "1000", "cleanup.policy": "delete"}
    prod = load(path, env="production")
    assert prod.env == "production" and prod.environments == ("production", "staging")
    orders, audit = prod.topics["orders"], prod.topics["audit"]
    assert (orders.partitions, orders.replication_factor) == (12, 3)
    assert orders.config == {
        "retention.ms": None,  # null: back to the cluster default
        "cleanup.policy": "delete",
        "min.insync.replicas": "2",
    }
    assert orders.set_configs == {"cleanup.policy": "delete", "min.insync.replicas": "2"}
    # environment defaults beat the topic's own base value
    assert audit.replication_factor == 3
    assert load(path, env="staging").topics["orders"].partitions == 6


def test_the_example_topics_file(tmp_path):
    spec = load(EXAMPLE)
    assert {t.name: t.partitions for t in spec} == {"orders": 6, "order-confirmations": 6}
    assert {t.replication_factor for t in spec} == {1}
    assert spec.topics["orders"].keyed_by == "store"
    prod = load(EXAMPLE, env="production")
    assert {t.replication_factor for t in prod} == {3}
    assert all(int(t.config["min.insync.replicas"]) <= 3 for t in prod)


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


# --------------------------------------------------------------------------- the planner


def actual(name, partitions=3, replication=1, configs=None, records=None, keyed=None):
    described = {
        key: ActualConfig(value, override) for key, (value, override) in (configs or {}).items()
    }
    return ActualTopic(name, partitions, replication, described, records, keyed)


SPEC = {
    "topics": {
        "orders": {
            "partitions": 6,
            "replication_factor": 1,
            "keyed_by": "store",
            "config": {"retention.ms": 1000, "cleanup.policy": ["delete", "compact"]},
        },
        "new": {"partitions": 2},
    }
}


def test_diff_creates_repartitions_and_reconfigures():
    state = ClusterState(
        {
            "orders": actual(
                "orders",
                3,
                configs={
                    "retention.ms": ("604800000", False),
                    "cleanup.policy": ("compact,delete", True),
                },
                records=10,
                keyed=True,
            ),
            "stray": actual("stray"),
            "__consumer_offsets": actual("__consumer_offsets"),
        }
    )
    plan = diff(load(SPEC), state, "plan", strict=True, bootstrap="host:1")
    assert plan.of(AddPartitions) == [AddPartitions("orders", 3, 6)]
    # the list order differs, the value does not... but Kafka compares strings: we change it
    (alter,) = plan.of(AlterConfigs)
    assert ConfigChange("retention.ms", "604800000", "1000", False) in alter.changes
    assert [c.topic.name for c in plan.of(CreateTopic)] == ["new"]
    assert "keys move to other partitions" in plan.warnings[0]
    assert "per-key order across the change is not kept" in plan.warnings[0]
    assert plan.undeclared == ["stray"]  # internal __ topics are not reported
    assert plan.exit_code(detailed=True) == 1


def test_diff_exit_codes_and_no_changes():
    state = ClusterState(
        {
            "orders": actual(
                "orders",
                6,
                configs={
                    "retention.ms": ("1000", True),
                    "cleanup.policy": ("delete,compact", True),
                },
            ),
            "new": actual("new", 2, replication=1),
        }
    )
    plan = diff(load(SPEC), state)
    assert plan.changes == [] and plan.errors == []
    assert plan.unchanged == ["orders", "new"]
    assert (plan.exit_code(), plan.exit_code(detailed=True)) == (0, 0)
    assert plan.summary() == "No changes: the cluster matches the spec."
    plan = diff(load(SPEC), ClusterState({}))
    assert (plan.exit_code(), plan.exit_code(detailed=True)) == (0, 2)


def test_diff_refuses_to_create_more_replicas_than_brokers_before_deleting():
    """``orders`` asks for 1 replica: fine on one broker. Declared with 3 on a cluster of
    2 brokers, it is an error for every command that would create it, and ``reset``
    plans neither its delete nor its create."""
    three = {"topics": {"orders": {"partitions": 6, "replication_factor": 3}}}
    existing = ClusterState({"orders": actual("orders", 6, replication=3)}, brokers=2)
    plan = diff(load(three), existing, "reset")
    assert plan.changes == []
    assert plan.errors == [
        "orders: replication factor 3 needs 3 brokers, the cluster has 2; Kafka refuses to "
        "create it (INVALID_REPLICATION_FACTOR)."
    ]
    for command in ("migrate", "create"):
        plan = diff(load(three), ClusterState({}, brokers=2), command)
        assert (plan.changes, len(plan.errors)) == ([], 1)
    assert not diff(load(three), ClusterState({}, brokers=3), "migrate").errors
    assert not diff(load(three), ClusterState({}), "migrate").errors  # brokers unknown
    assert not diff(load(three), existing, "migrate").errors  # nothing to create


def test_diff_refuses_shrinking_and_replication_changes():
    state = ClusterState({"orders": actual("orders", 8, replication=3), "new": actual("new", 2)})
    plan = diff(load(SPEC), state, "migrate")
    assert any("cannot shrink from 8 to 6 partitions" in e for e in plan.errors)
    assert any("replication factor is 3, spec says 1" in e for e in plan.errors)
    # align only looks at configs; repartition refuses the shrink but not the replication
    assert not diff(load(SPEC), state, "align").errors
    assert len(diff(load(SPEC), state, "repartition").errors) == 1


def test_keyed_warning_needs_records():
    empty = ClusterState({"orders": actual("orders", 3, records=0, keyed=None)})
    assert diff(load(SPEC), empty).warnings == []
    unkeyed = {"topics": {"orders": {"partitions": 6}}}
    data = ClusterState({"orders": actual("orders", 3, records=5, keyed=False)})
    assert diff(load(unkeyed), data).warnings == []
    data = ClusterState({"orders": actual("orders", 3, records=5, keyed=True)})
    assert len(diff(load(unkeyed), data).warnings) == 1
    # keyed_by declares keyed data even when the sampled newest records carry no key
    sampled_unkeyed = ClusterState({"orders": actual("orders", 3, records=5, keyed=False)})
    assert len(diff(load(SPEC), sampled_unkeyed).warnings) == 1


def test_null_config_removes_an_override_only():
    spec = load({"topics": {"t": {"partitions": 1, "config": {"retention.ms": None}}}})
    overridden = ClusterState({"t": actual("t", 1, configs={"retention.ms": ("5", True)})})
    (alter,) = diff(spec, overridden).of(AlterConfigs)
    assert alter.changes == (ConfigChange("retention.ms", "5", None, True),)
    default = ClusterState({"t": actual("t", 1, configs={"retention.ms": ("604800000", False)})})
    assert diff(spec, default).changes == []


def test_command_scopes():
    state = ClusterState({"orders": actual("orders", 3)})
    spec = load(SPEC)
    assert [type(c) for c in diff(spec, state, "create").changes] == [CreateTopic]
    assert [type(c) for c in diff(spec, state, "repartition").changes] == [AddPartitions]
    assert [type(c) for c in diff(spec, state, "align").changes] == [AlterConfigs]
    assert diff(spec, state, "delete").changes == [DeleteTopic("orders", 3)]
    reset = diff(spec, state, "reset").changes
    assert [type(c) for c in reset] == [DeleteTopic, CreateTopic, CreateTopic]


def test_render_is_a_readable_diff():
    state = ClusterState(
        {
            "orders": actual(
                "orders", 8, configs={"retention.ms": ("5", True)}, records=3, keyed=True
            ),
            "stray": actual("stray"),
        }
    )
    spec = load(
        {
            "topics": {
                "orders": {"partitions": 6, "config": {"retention.ms": 1000}},
                "new": {"partitions": 2, "config": {"cleanup.policy": "compact"}},
            }
        }
    )
    out = io.StringIO()
    render(diff(spec, state, "plan", strict=True, bootstrap="h:1"), Console(file=out, width=300))
    text = out.getvalue()
    assert "plan <dict> on h:1" in text
    assert "~ orders  config:" in text
    assert "~ retention.ms: 5 → 1000" in text
    assert "+ new  create: partitions=2 replication_factor=cluster default" in text
    assert "+ cleanup.policy = compact" in text
    assert "x error: orders: cannot shrink from 8 to 6 partitions" in text
    assert "x error: stray: exists on the cluster but is not declared (--strict)" in text
    assert text.rstrip().endswith("Plan: 1 to create, 1 to reconfigure, 2 errors.")
