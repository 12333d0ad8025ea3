"""topics.yaml loading (no broker needed): the basic shape, the forms a spec may take,
values normalized to Kafka's strings, environments over defaults, and the example file."""

from __future__ import annotations

from pathlib import Path

from onceflow.topics.spec import load
from tests.unit.topics_spec_helpers import write

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders" / "topics.yaml"


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
