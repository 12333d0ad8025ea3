"""The topics planner's diff of a spec against a cluster's state (no broker needed):
creates, repartitions and reconfigures, exit codes, refusals, the keyed-data warning,
command scopes and the rendered plan."""

from __future__ import annotations

import io

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
from onceflow.topics.spec import load

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
