"""Admin APIs: topics, partitions, configs (valid and invalid values), records deletion,
cluster and log-dir descriptions, ACLs without an authorizer, quotas-free SCRAM admin,
reassignments and elections on one node, and the handshake APIs."""

from __future__ import annotations

import pytest

from tests.differential import steps as s
from tests.differential.driver import Step
from tests.differential.scenario import Scenario, check, expecting, scenarios

pytestmark = pytest.mark.xdist_group("differential")

A, P, C = "admin", "p1", "c1"
T = "~t"
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_configs(
    resources: list[tuple[int, str, list[str] | None]],
    synonyms: bool = False,
    version: int | None = None,
) -> Step:
    return Step(
        A,
        32,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": k}
                for t, n, k in resources
            ],
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
        version,
    )


def topic_configs(name: str, keys: list[str]) -> Step:
    return describe_configs([(TOPIC_RESOURCE, name, keys)])


def alter_configs(
    name: str,
    configs: dict[str, str | None],
    resource_type: int = TOPIC_RESOURCE,
    validate_only: bool = False,
) -> list[Step]:
    step = Step(
        A,
        33,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return [step, *s.metadata_barrier()]


def incremental(
    name: str,
    ops: list[tuple[str, int, str | None]],
    resource_type: int = TOPIC_RESOURCE,
    validate_only: bool = False,
) -> list[Step]:
    step = Step(
        A,
        44,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": k, "config_operation": op, "value": v} for k, op, v in ops
                    ],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return [step, *s.metadata_barrier()]


def delete_records(offsets: dict[str, list[tuple[int, int]]]) -> Step:
    return Step(
        A,
        21,
        {
            "topics": [
                {"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in parts]}
                for t, parts in offsets.items()
            ],
            "timeout": 5000,
        },
    )


def scram_user_visible(name: str) -> Step:
    """Wait until the broker describes the user's credentials (Kafka's broker learns a
    change from the controller's metadata a moment after AlterUserScramCredentials)."""
    step = Step(A, 50, {"users": [{"name": name}]}, compare=False, label="credentials visible")
    step.wait_until = lambda r: all(result.error_code == 0 for result in r.results)
    return step


KEYS = [
    "retention.ms",
    "cleanup.policy",
    "max.message.bytes",
    "min.insync.replicas",
    "segment.bytes",
]
ACL_FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}

SCENARIOS = scenarios(
    # ---- CreateTopics
    Scenario(
        "create topic and describe it",
        [*s.create_topics([(T, 3, 1)]), s.metadata([T]), topic_configs(T, KEYS)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic that exists",
        [*s.create_topics([T]), *s.create_topics([T], wait=False)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic validate only",
        [*s.create_topics([(T, 2, 1)], validate_only=True), s.metadata([T])],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad names",
        [*s.create_topics(["~bad/name", "~x" * 130, "..", "", "~a.b_c"], wait=False)],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad partition counts",
        [*s.create_topics([("~zero", 0, 1), ("~neg", -5, 1)], wait=False)],
    ),
    Scenario(
        "create topic default partition count",
        [*s.create_topics([("~dflt", -1, -1)]), s.metadata(["~dflt"])],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic bad replication factor",
        [*s.create_topics([("~rf3", 1, 3), ("~rf0", 1, 0), ("~rfneg", 1, -2)], wait=False)],
    ),
    Scenario(
        "create topic bad config values",
        [
            *s.create_topics(["~c1"], {"retention.ms": "abc"}, wait=False),
            *s.create_topics(["~c2"], {"cleanup.policy": "shred"}, wait=False),
            *s.create_topics(["~c3"], {"no.such.config": "1"}, wait=False),
            *s.create_topics(["~c4"], {"segment.bytes": "5"}, wait=False),
            *s.create_topics(["~c5"], {"retention.ms": None}, wait=False),
            s.metadata(["~c1", "~c2", "~c3", "~c4", "~c5"]),
        ],
    ),
    Scenario(
        "create topic with valid configs",
        [
            *s.create_topics(
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
            *s.create_topics(
                [("~man", -1, -1)],
                assignments=[
                    {"partition_index": 0, "broker_ids": [1]},
                    {"partition_index": 1, "broker_ids": [1]},
                ],
            ),
            s.metadata(["~man"]),
        ],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create topic with bad assignments",
        [
            *s.create_topics(
                [("~b1", -1, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [7]}],
                wait=False,
            ),
            *s.create_topics(
                [("~b2", 2, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [1]}],
                wait=False,
            ),
            *s.create_topics(
                [("~b3", -1, -1)],
                assignments=[{"partition_index": 1, "broker_ids": [1]}],
                wait=False,
            ),
            *s.create_topics(
                [("~b4", -1, -1)],
                assignments=[{"partition_index": 0, "broker_ids": [1, 1]}],
                wait=False,
            ),
        ],
    ),
    Scenario("create the same topic twice in one request", [*s.create_topics([T, T], wait=False)]),
    Scenario(
        "create topic old versions",
        [*[s.create_topics([f"~v{v}"], version=v, wait=False)[0] for v in (2, 3, 4, 5, 6)]],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "create internal topic name",
        [*s.create_topics(["__consumer_offsets", "__transaction_state"], wait=False)],
    ),
    # ---- DeleteTopics
    Scenario(
        "delete topic",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a")),
            *s.delete_topics([T]),
            s.metadata([T]),
            s.produce(P, T, s.batch(b"b")),
            s.fetch(C, T),
        ],
    ),
    Scenario("delete unknown topic", [*s.delete_topics(["~absent"], wait=False)]),
    Scenario(
        "delete topic twice in one request", [s.topic(T), *s.delete_topics([T, T], wait=False)]
    ),
    Scenario(
        "delete topic by unknown id",
        [Step(A, 20, {"topics": [{"name": None, "topic_id": 12345}], "timeout": 5000}, 6)],
    ),
    Scenario(
        "delete topic and create it again",
        [
            s.topic(T, 2),
            s.produce(P, T, s.batch(b"a")),
            *s.delete_topics([T]),
            *s.create_topics([(T, 1, 1)]),
            *s.offsets_view(C, T),
        ],
        expect=("topic-configs-3.9",),
    ),
    Scenario(
        "delete topic old versions",
        [
            s.topic("~v1"),
            s.topic("~v3"),
            s.topic("~v5"),
            *[s.delete_topics([f"~v{v}"], version=v, wait=False)[0] for v in (1, 3, 5)],
        ],
    ),
    # ---- CreatePartitions
    Scenario(
        "create partitions grow",
        [
            s.topic(T),
            *s.create_partitions(T, 3),
            s.topic_ready([T], 3),
            s.partitions_led(T, 3),
            s.metadata([T]),
            s.produce(P, T, s.batch(b"a"), partition=2),
        ],
    ),
    Scenario(
        "create partitions same or fewer",
        [
            s.topic(T, 2),
            *s.create_partitions(T, 2),
            *s.create_partitions(T, 1),
            *s.create_partitions(T, 0),
            *s.create_partitions(T, -1),
        ],
    ),
    Scenario("create partitions unknown topic", [*s.create_partitions("~absent", 3)]),
    Scenario(
        "create partitions validate only",
        [s.topic(T), *s.create_partitions(T, 4, validate_only=True), s.metadata([T])],
    ),
    Scenario(
        "create partitions with bad assignments",
        [
            s.topic(T),
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
            s.topic(T),
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
    # ---- DescribeConfigs
    Scenario(
        "describe topic configs by key",
        [
            s.topic(T, configs={"retention.ms": "5000"}),
            topic_configs(T, KEYS),
            topic_configs(T, ["no.such.key"]),
            describe_configs([(TOPIC_RESOURCE, T, ["retention.ms"])], synonyms=True),
        ],
    ),
    Scenario(
        "describe all topic configs",
        [s.topic(T), topic_configs(T, None)],
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
            s.topic(T),
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
            s.topic(T),
            alter_configs(T, {"retention.ms": "1234", "cleanup.policy": "compact"}),
            topic_configs(T, KEYS),
            alter_configs(T, {}),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "alter configs invalid values",
        [
            s.topic(T),
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
            s.topic(T),
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
            s.topic(T),
            incremental(T, [("retention.ms", SET, "4321")]),
            topic_configs(T, KEYS),
            incremental(T, [("retention.ms", DELETE, None)]),
            topic_configs(T, KEYS),
        ],
    ),
    Scenario(
        "incremental alter append and subtract",
        [
            s.topic(T),
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
            s.topic(T),
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
            s.topic(T),
            incremental(T, [("retention.ms", SET, "1")], validate_only=True),
            topic_configs(T, ["retention.ms"]),
            incremental("~absent", [("retention.ms", SET, "1")]),
            incremental("", [("log.retention.ms", SET, "1")], BROKER_RESOURCE, True),
            incremental("1", [("num.partitions", SET, "3")], BROKER_RESOURCE, True),
        ],
    ),
    # ---- DeleteRecords
    Scenario(
        "delete records",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a", b"b", b"c")),
            s.produce(P, T, s.batch(b"d")),
            delete_records({T: [(0, 2)]}),
            *s.offsets_view(C, T),
            s.fetch(C, T, 1),
            delete_records({T: [(0, 1)]}),
            delete_records({T: [(0, -1)]}),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "delete records beyond the high watermark",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"a")),
            delete_records({T: [(0, 5)]}),
            delete_records({T: [(0, -2)]}),
            *s.offsets_view(C, T),
        ],
    ),
    Scenario(
        "delete records unknown topic and partition",
        [s.topic(T), delete_records({"~absent": [(0, 1)], T: [(3, 1)]})],
    ),
    Scenario(
        "delete records during a transaction",
        [
            s.topic(T),
            s.init_producer_id(P, "~tx"),
            s.add_partitions(P, "~tx", {T: [0]}),
            s.produce(
                P,
                T,
                s.batch(b"a", b"b", producer=P, sequence=0, transactional=True),
                transactional_id="~tx",
                version=11,
            ),
            delete_records({T: [(0, 2)]}),
            delete_records({T: [(0, -1)]}),
            *s.offsets_view(C, T),
        ],
    ),
    # ---- Metadata
    Scenario(
        "metadata versions",
        [s.topic(T, 2), *[s.metadata([T], version=v) for v in (0, 1, 4, 7, 9, 10, 11)]],
    ),
    Scenario("metadata all topics", [s.topic(T), s.topic("~u"), s.metadata(None)]),
    Scenario("metadata unknown and invalid topics", [s.metadata(["~absent", "~bad/name", ""])]),
    Scenario(
        "metadata auto creates",
        [
            s.metadata(["~auto"], auto_create=True),
            s.topic_ready(["~auto"]),
            s.partitions_led("~auto", 1),
            s.metadata(["~auto"]),
            topic_configs("~auto", KEYS),
        ],
    ),
    Scenario(
        "metadata internal topics", [s.metadata(["__consumer_offsets", "__transaction_state"])]
    ),
    Scenario(
        "metadata with authorized operations",
        [
            s.topic(T),
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
            s.topic(T),
            Step(A, 3, {"topics": [{"name": None, "topic_id": s.TopicId(T)}]}),
            Step(A, 3, {"topics": [{"name": None, "topic_id": 42}]}),
        ],
    ),
    # ---- cluster, log dirs, elections, reassignments
    Scenario(
        "describe cluster",
        [
            Step(A, 60, {"include_cluster_authorized_operations": False}),
            Step(A, 60, {"include_cluster_authorized_operations": True}),
            Step(A, 60, {"endpoint_type": 2}),
            Step(A, 60, {"endpoint_type": 7}),
        ],
    ),
    Scenario(
        "describe log dirs",
        [
            s.topic(T),
            s.produce(P, T, s.batch(b"abc")),
            Step(
                A,
                35,
                {
                    "topics": [
                        {"topic": T, "partitions": [0, 4]},
                        {"topic": "~absent", "partitions": [0]},
                    ]
                },
            ),
        ],
    ),
    Scenario(
        "alter replica log dirs",
        [
            s.topic(T),
            Step(
                A,
                34,
                {"dirs": [{"path": "/nonexistent", "topics": [{"name": T, "partitions": [0]}]}]},
            ),
        ],
    ),
    Scenario(
        "elect leaders",
        [
            s.topic(T, 2),
            Step(
                A,
                43,
                {
                    "election_type": 0,
                    "topic_partitions": [
                        {"topic": T, "partitions": [0, 1, 5]},
                        {"topic": "~absent", "partitions": [0]},
                    ],
                    "timeout": 5000,
                },
            ),
            Step(
                A,
                43,
                {
                    "election_type": 1,
                    "topic_partitions": [{"topic": T, "partitions": [0]}],
                    "timeout": 5000,
                },
            ),
            Step(
                A,
                43,
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": T, "partitions": [0]}],
                    "timeout": 5000,
                },
                0,
            ),
        ],
    ),
    Scenario(
        "partition reassignments",
        [
            s.topic(T, 2),
            Step(A, 46, {"topics": [{"name": T, "partition_indexes": [0, 1]}], "timeout_ms": 5000}),
            Step(
                A,
                45,
                {
                    "topics": [
                        {
                            "name": T,
                            "partitions": [
                                {"partition_index": 0, "replicas": [1]},
                                {"partition_index": 1, "replicas": None},
                            ],
                        }
                    ],
                    "timeout_ms": 5000,
                },
            ),
            Step(
                A,
                45,
                {
                    "topics": [
                        {"name": T, "partitions": [{"partition_index": 0, "replicas": [7]}]},
                        {
                            "name": "~absent",
                            "partitions": [{"partition_index": 0, "replicas": [1]}],
                        },
                    ],
                    "timeout_ms": 5000,
                },
            ),
            Step(A, 46, {"topics": None, "timeout_ms": 5000}),
        ],
    ),
    # ---- ACLs with no authorizer configured
    Scenario(
        "acls without an authorizer",
        [
            Step(A, 29, ACL_FILTER),
            Step(
                A,
                30,
                {
                    "creations": [
                        {
                            "resource_type": 2,
                            "resource_name": T,
                            "resource_pattern_type": 3,
                            "principal": "User:alice",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 3,
                        }
                    ]
                },
            ),
            Step(A, 31, {"filters": [ACL_FILTER]}),
        ],
    ),
    # ---- SCRAM credentials
    Scenario(
        "scram credentials",
        [
            Step(A, 50, {"users": [{"name": "~alice"}]}),
            Step(
                A,
                51,
                {
                    "deletions": [],
                    "upsertions": [
                        {
                            "name": "~alice",
                            "mechanism": 1,
                            "iterations": 8192,
                            "salt": b"salt",
                            "salted_password": b"x" * 32,
                        }
                    ],
                },
            ),
            scram_user_visible("~alice"),
            Step(A, 50, {"users": [{"name": "~alice"}, {"name": "~nobody"}]}),
            Step(
                A,
                51,
                {
                    "deletions": [{"name": "~alice", "mechanism": 2}],
                    "upsertions": [
                        {
                            "name": "~bob",
                            "mechanism": 1,
                            "iterations": 10,
                            "salt": b"s",
                            "salted_password": b"x" * 32,
                        }
                    ],
                },
            ),
            Step(
                A,
                51,
                {
                    "deletions": [{"name": "~alice", "mechanism": 1}],
                    "upsertions": [
                        {
                            "name": "~alice",
                            "mechanism": 1,
                            "iterations": 8192,
                            "salt": b"s",
                            "salted_password": b"y" * 32,
                        }
                    ],
                },
            ),
            Step(
                A,
                51,
                {
                    "deletions": [],
                    "upsertions": [
                        {
                            "name": "~carol",
                            "mechanism": 9,
                            "iterations": 8192,
                            "salt": b"s",
                            "salted_password": b"y" * 32,
                        }
                    ],
                },
            ),
            Step(A, 50, {"users": None}),
        ],
    ),
    # ---- handshakes
    Scenario(
        "api versions",
        [
            Step(A, 18, {"client_software_name": "diff", "client_software_version": "1.0"}, v)
            for v in (0, 1, 2, 3)
        ],
    ),
    Scenario(
        "api versions bad software name",
        [Step(A, 18, {"client_software_name": "bad name!", "client_software_version": "1.0"}, 3)],
    ),
    Scenario(
        "api versions unsupported version",
        [
            Step(
                A,
                18,
                {"client_software_name": "diff", "client_software_version": "1"},
                3,
                raw_version=99,
            )
        ],
    ),
    Scenario(
        "sasl handshake on a plaintext listener",
        [Step(A, 17, {"mechanism": "PLAIN"}, 1), Step(A, 17, {"mechanism": "GSSAPI"}, 0)],
    ),
    Scenario(
        "sasl authenticate without handshake",
        [Step(A, 36, {"auth_bytes": b"\0user\0pass"}, 2), s.metadata(["~x"])],
    ),
    Scenario(
        "write txn markers from a client",
        [
            s.topic(T),
            Step(
                A,
                27,
                {
                    "markers": [
                        {
                            "producer_id": 999999,
                            "producer_epoch": 0,
                            "transaction_result": False,
                            "topics": [{"name": T, "partition_indexes": [0]}],
                            "coordinator_epoch": 0,
                        }
                    ]
                },
            ),
            *s.offsets_view(C, T),
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
        "describe all topic configs": ("topic-configs-3.9",),
        "alter configs valid": ("topic-configs-3.9",),
        "alter configs invalid values": ("topic-configs-3.9",),
        "incremental alter set and delete": ("topic-configs-3.9",),
        "create topic validate only": ("create-topics-validate-only",),
        "describe topic configs by key": (
            "describe-configs-synonyms-and-broker",
            "topic-configs-3.9",
        ),
        "describe broker configs by key": ("describe-configs-synonyms-and-broker",),
        "incremental alter invalid values": ("incremental-unknown-operation", "topic-configs-3.9"),
        "metadata unknown and invalid topics": ("metadata-invalid-topic-names",),
        "metadata auto creates": ("metadata-auto-create", "topic-configs-3.9"),
    },
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
