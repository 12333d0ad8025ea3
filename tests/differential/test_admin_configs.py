"""Admin APIs for configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on
topics and the broker, with valid and invalid values."""

from __future__ import annotations

import pytest

from tests.differential import topic_steps as ts
from tests.differential.config_steps import (
    APPEND,
    BROKER_RESOURCE,
    DELETE,
    KEYS,
    SET,
    SUBTRACT,
    TOPIC_RESOURCE,
    alter_configs,
    describe_configs,
    incremental,
    topic_configs,
)
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

T = "~t"

SCENARIOS = scenarios(
    # ---- DescribeConfigs
    Scenario(
        "describe topic configs by key",
        [
            ts.topic(T, configs={"retention.ms": "5000"}),
            topic_configs(T, KEYS),
            topic_configs(T, ["no.such.key"]),
            describe_configs([(TOPIC_RESOURCE, T, ["retention.ms"])], synonyms=True),
        ],
    ),
    Scenario(
        "describe all topic configs",
        [ts.topic(T), topic_configs(T, None)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "describe configs unknown topic and bad resources",
        [
            topic_configs("~absent", KEYS),
            describe_configs([(BROKER_RESOURCE, "7", ["num.partitions"])]),
            describe_configs([(BROKER_RESOURCE, "abc", ["num.partitions"])]),
            describe_configs([(99, "x", None)]),
            describe_configs([(TOPIC_RESOURCE, "", KEYS)]),
        ],
    ),
    Scenario(
        "describe broker configs by key",
        [
            describe_configs(
                [
                    (
                        BROKER_RESOURCE,
                        "1",
                        [
                            "num.partitions",
                            "auto.create.topics.enable",
                            "offsets.topic.num.partitions",
                            "log.retention.ms",
                            "message.max.bytes",
                        ],
                    )
                ]
            ),
            describe_configs([(BROKER_RESOURCE, "", ["num.partitions"])]),
        ],
    ),
    Scenario(
        "describe configs old versions",
        [
            ts.topic(T),
            *[
                describe_configs(
                    [(TOPIC_RESOURCE, T, ["retention.ms", "cleanup.policy"])], version=v
                )
                for v in (1, 2, 3)
            ],
        ],
    ),
    # ---- AlterConfigs
    Scenario(
        "alter configs valid",
        [
            ts.topic(T),
            alter_configs(T, {"retention.ms": "1234", "cleanup.policy": "compact"}),
            topic_configs(T, KEYS),
            alter_configs(T, {}),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "alter configs invalid values",
        [
            ts.topic(T),
            alter_configs(T, {"retention.ms": "abc"}),
            alter_configs(T, {"cleanup.policy": "shred"}),
            alter_configs(T, {"no.such.config": "1"}),
            alter_configs(T, {"segment.bytes": "5"}),
            alter_configs(T, {"min.insync.replicas": "0"}),
            alter_configs(T, {"retention.ms": None}),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "alter configs validate only",
        [
            ts.topic(T),
            alter_configs(T, {"retention.ms": "999"}, validate_only=True),
            alter_configs(T, {"retention.ms": "x"}, validate_only=True),
            topic_configs(T, ["retention.ms"]),
        ],
    ),
    Scenario(
        "alter configs unknown topic and broker",
        [
            alter_configs("~absent", {"retention.ms": "1"}),
            alter_configs("1", {"log.retention.ms": "1000"}, BROKER_RESOURCE, True),
            alter_configs("", {"num.partitions": "3"}, BROKER_RESOURCE, True),
            alter_configs("x", {"a": "b"}, 99),
        ],
    ),
    # ---- IncrementalAlterConfigs
    Scenario(
        "incremental alter set and delete",
        [
            ts.topic(T),
            incremental(T, [("retention.ms", SET, "4321")]),
            topic_configs(T, KEYS),
            incremental(T, [("retention.ms", DELETE, None)]),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "incremental alter append and subtract",
        [
            ts.topic(T),
            incremental(T, [("cleanup.policy", APPEND, "compact")]),
            topic_configs(T, ["cleanup.policy"]),
            incremental(T, [("cleanup.policy", SUBTRACT, "delete")]),
            topic_configs(T, ["cleanup.policy"]),
            incremental(T, [("cleanup.policy", SUBTRACT, "compact")]),
            topic_configs(T, ["cleanup.policy"]),
            incremental(T, [("retention.ms", APPEND, "5")]),
        ],
    ),
    Scenario(
        "incremental alter invalid values",
        [
            ts.topic(T),
            incremental(T, [("retention.ms", SET, "abc")]),
            incremental(T, [("cleanup.policy", SET, "shred")]),
            incremental(T, [("no.such.config", SET, "1")]),
            incremental(T, [("retention.ms", 7, "1")]),
            incremental(T, [("retention.ms", SET, "1"), ("retention.ms", SET, "2")]),
            incremental(T, [("segment.bytes", SET, "5")]),
            incremental(T, [("retention.ms", SET, None)]),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "incremental alter validate only and unknown",
        [
            ts.topic(T),
            incremental(T, [("retention.ms", SET, "1")], validate_only=True),
            topic_configs(T, ["retention.ms"]),
            incremental("~absent", [("retention.ms", SET, "1")]),
            incremental("", [("log.retention.ms", SET, "1")], BROKER_RESOURCE, True),
            incremental("1", [("num.partitions", SET, "3")], BROKER_RESOURCE, True),
        ],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
        "describe all topic configs": ("topic-configs-3.9",),
        "alter configs valid": ("topic-configs-3.9",),
        "alter configs invalid values": ("topic-configs-3.9",),
        "incremental alter set and delete": ("topic-configs-3.9",),
        "describe topic configs by key": (
            "describe-configs-synonyms-and-broker",
            "topic-configs-3.9",
        ),
        "describe broker configs by key": ("describe-configs-synonyms-and-broker",),
        "incremental alter invalid values": ("incremental-unknown-operation", "topic-configs-3.9"),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
