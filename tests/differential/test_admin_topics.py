"""Admin APIs for topics: CreateTopics (valid and invalid names, counts, configs,
assignments, versions), DeleteTopics, CreatePartitions and Metadata."""

from __future__ import annotations

import pytest

from tests.differential import record_steps as rs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential.config_steps import KEYS, topic_configs
from tests.differential.driver import Step
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

A, P, C = "admin", "p1", "c1"
T = "~t"

SCENARIOS = scenarios(
    # ---- CreateTopics
    Scenario(
        "create topic and describe it",
        [*ts.create_topics([(T, 3, 1)]), ts.metadata([T]), topic_configs(T, KEYS)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic that exists",
        [*ts.create_topics([T]), *ts.create_topics([T], wait=False)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic validate only",
        [*ts.create_topics([(T, 2, 1)], validate_only=True), ts.metadata([T])],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad names",
        [*ts.create_topics(["~bad/name", "~x" * 130, "..", "", "~a.b_c"], wait=False)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad partition counts",
        [*ts.create_topics([("~zero", 0, 1), ("~neg", -5, 1)], wait=False)],
    ),
    Scenario(
        "create topic default partition count",
        [*ts.create_topics([("~dflt", -1, -1)]), ts.metadata(["~dflt"])],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad replication factor",
        [*ts.create_topics([("~rf3", 1, 3), ("~rf0", 1, 0), ("~rfneg", 1, -2)], wait=False)],
    ),
    Scenario(
        "create topic bad config values",
        [
            *ts.create_topics(["~c1"], {"retention.ms": "abc"}, wait=False),
            *ts.create_topics(["~c2"], {"cleanup.policy": "shred"}, wait=False),
            *ts.create_topics(["~c3"], {"no.such.config": "1"}, wait=False),
            *ts.create_topics(["~c4"], {"segment.bytes": "5"}, wait=False),
            *ts.create_topics(["~c5"], {"retention.ms": None}, wait=False),
            ts.metadata(["~c1", "~c2", "~c3", "~c4", "~c5"]),
        ],
    ),
    Scenario(
        "create topic with valid configs",
        [
            *ts.create_topics(
                [T],
                {
                    "retention.ms": "1000",
                    "cleanup.policy": "compact,delete",
                    "max.message.bytes": "2000",
                },
            ),
            topic_configs(T, KEYS),
        ],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic with assignments",
        [
            *ts.create_topics(
                [("~man", -1, -1)],
                assignments=[
                    {"partition_index": 0, "broker_ids": [1]},
                    {"partition_index": 1, "broker_ids": [1]},
                ],
            ),
            ts.metadata(["~man"]),
        ],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic with bad assignments",
        [
            *ts.create_topics(
                [("~b1", -1, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [7]}],
                wait=False,
            ),
            *ts.create_topics(
                [("~b2", 2, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [1]}],
                wait=False,
            ),
            *ts.create_topics(
                [("~b3", -1, -1)],
                assignments=[{"partition_index": 1, "broker_ids": [1]}],
                wait=False,
            ),
            *ts.create_topics(
                [("~b4", -1, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [1, 1]}],
                wait=False,
            ),
        ],
    ),
    Scenario("create the same topic twice in one request", [*ts.create_topics([T, T], wait=False)]),
    Scenario(
        "create topic old versions",
        [*[ts.create_topics([f"~v{v}"], version=v, wait=False)[0] for v in (2, 3, 4, 5, 6)]],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create internal topic name",
        [*ts.create_topics(["__consumer_offsets", "__transaction_state"], wait=False)],
    ),
    # ---- DeleteTopics
    Scenario(
        "delete topic",
        [
            ts.topic(T),
            rs.produce(P, T, rs.batch(b"a")),
            *ts.delete_topics([T]),
            ts.metadata([T]),
            rs.produce(P, T, rs.batch(b"b")),
            rs.fetch(C, T),
        ],
    ),
    Scenario("delete unknown topic", [*ts.delete_topics(["~absent"], wait=False)]),
    Scenario(
        "delete topic twice in one request", [ts.topic(T), *ts.delete_topics([T, T], wait=False)]
    ),
    Scenario(
        "delete topic by unknown id",
        [Step(A, 20, {"topics": [{"name": None, "topic_id": 12345}], "timeout": 5000}, 6)],
    ),
    Scenario(
        "delete topic and create it again",
        [
            ts.topic(T, 2),
            rs.produce(P, T, rs.batch(b"a")),
            *ts.delete_topics([T]),
            *ts.create_topics([(T, 1, 1)]),
            *rs.offsets_view(C, T),
        ],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "delete topic old versions",
        [
            ts.topic("~v1"),
            ts.topic("~v3"),
            ts.topic("~v5"),
            *[ts.delete_topics([f"~v{v}"], version=v, wait=False)[0] for v in (1, 3, 5)],
        ],
    ),
    # ---- CreatePartitions
    Scenario(
        "create partitions grow",
        [
            ts.topic(T),
            *ts.create_partitions(T, 3),
            ts.topic_ready([T], 3),
            ts.partitions_led(T, 3),
            ts.metadata([T]),
            rs.produce(P, T, rs.batch(b"a"), partition=2),
        ],
    ),
    Scenario(
        "create partitions same or fewer",
        [
            ts.topic(T, 2),
            *ts.create_partitions(T, 2),
            *ts.create_partitions(T, 1),
            *ts.create_partitions(T, 0),
            *ts.create_partitions(T, -1),
        ],
    ),
    Scenario("create partitions unknown topic", [*ts.create_partitions("~absent", 3)]),
    Scenario(
        "create partitions validate only",
        [ts.topic(T), *ts.create_partitions(T, 4, validate_only=True), ts.metadata([T])],
    ),
    Scenario(
        "create partitions with bad assignments",
        [
            ts.topic(T),
            Step(
                A,
                37,
                {
                    "topics": [{"name": T, "count": 3, "assignments": [{"broker_ids": [1]}]}],
                    "timeout": 5000,
                },
            ),
            Step(
                A,
                37,
                {
                    "topics": [{"name": T, "count": 2, "assignments": [{"broker_ids": [9]}]}],
                    "timeout": 5000,
                },
            ),
        ],
    ),
    Scenario(
        "create partitions twice in one request",
        [
            ts.topic(T),
            Step(
                A,
                37,
                {
                    "topics": [
                        {"name": T, "count": 2, "assignments": None},
                        {"name": T, "count": 3, "assignments": None},
                    ],
                    "timeout": 5000,
                },
            ),
        ],
    ),
    # ---- Metadata
    Scenario(
        "metadata versions",
        [ts.topic(T, 2), *[ts.metadata([T], version=v) for v in (0, 1, 4, 7, 9, 10, 11)]],
    ),
    Scenario("metadata all topics", [ts.topic(T), ts.topic("~u"), ts.metadata(None)]),
    Scenario("metadata unknown and invalid topics", [ts.metadata(["~absent", "~bad/name", ""])]),
    Scenario(
        "metadata auto creates",
        [
            ts.metadata(["~auto"], auto_create=True),
            ts.topic_ready(["~auto"]),
            ts.partitions_led("~auto", 1),
            ts.metadata(["~auto"]),
            topic_configs("~auto", KEYS),
        ],
    ),
    Scenario(
        "metadata internal topics", [ts.metadata(["__consumer_offsets", "__transaction_state"])]
    ),
    Scenario(
        "metadata with authorized operations",
        [
            ts.topic(T),
            Step(
                A,
                3,
                {
                    "topics": [{"name": T, "topic_id": None}],
                    "include_topic_authorized_operations": True,
                },
            ),
        ],
    ),
    Scenario(
        "metadata by topic id",
        [
            ts.topic(T),
            Step(A, 3, {"topics": [{"name": None, "topic_id": sv.TopicId(T)}]}),
            Step(A, 3, {"topics": [{"name": None, "topic_id": 42}]}),
        ],
    ),
)


SCENARIOS = expecting(
    SCENARIOS,
    {
        "create topic and describe it": ("topic-configs-3.9",),
        "create topic that exists": ("topic-configs-3.9",),
        "create topic bad names": ("topic-configs-3.9",),
        "create topic default partition count": ("topic-configs-3.9",),
        "create topic with valid configs": ("topic-configs-3.9",),
        "create topic with assignments": ("topic-configs-3.9",),
        "create topic old versions": ("topic-configs-3.9",),
        "delete topic and create it again": ("topic-configs-3.9",),
        "create topic validate only": ("create-topics-validate-only",),
        "metadata unknown and invalid topics": ("metadata-invalid-topic-names",),
        "metadata auto creates": ("metadata-auto-create", "topic-configs-3.9"),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
