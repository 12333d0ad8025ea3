"""Admin APIs a one-broker Kafka answers with little or nothing to do: leader elections,
log directories, partition reassignments, the cluster's details. Driven by kafka-python's
and confluent-kafka's admin clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    LogDirNotFoundError,
    NoError,
    NoReassignmentInProgressError,
    ReplicaNotAvailableError,
)
from kafka.structs import TopicPartitionReplica

from onceflow.testing import PluginBroker

TOPIC = "admin-apis"

# One broker for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("admin-apis")


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    admin = AdminClient({"bootstrap.servers": kafka_module_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
    return kafka_module_broker


@pytest.fixture(scope="module")
def admin(broker: PluginBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def test_preferred_election_is_never_needed(broker, admin) -> None:
    response = admin.elect_leaders(0, {TOPIC: [0, 1]}, raise_errors=False)
    (result,) = response.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, KafkaError.ELECTION_NOT_NEEDED),
        (1, KafkaError.ELECTION_NOT_NEEDED),
    ]
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    partition = ConfluentPartition(TOPIC, 0)
    answer = confluent.elect_leaders(ElectionType.PREFERRED, [partition]).result(10)
    assert answer[partition].code() == KafkaError.ELECTION_NOT_NEEDED
    unknown = admin.elect_leaders(1, {"no-such-topic": [0]}, raise_errors=False)
    code = unknown.replica_election_results[0].partition_result[0].error_code
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_the_data_directory_is_the_one_log_dir(broker, admin) -> None:
    (answer,) = admin.describe_log_dirs({TOPIC: [0, 1]})
    (log_dir,) = answer["log_dirs"]
    assert Path(log_dir["log_dir"]) == broker.data_dir.resolve()
    assert log_dir["error_code"] == 0 and log_dir["usable_bytes"] > 0
    (topic,) = log_dir["topics"]
    assert (topic["name"], [p["partition_index"] for p in topic["partitions"]]) == (TOPIC, [0, 1])

    here = str(broker.data_dir.resolve())
    moves = {
        TopicPartitionReplica(TOPIC, 0, 0): here,
        TopicPartitionReplica(TOPIC, 1, 0): "/no/such/dir",
        TopicPartitionReplica("no-such-topic", 0, 0): here,
    }
    results = admin.alter_replica_log_dirs(moves)
    assert [results[replica] for replica in moves] == [
        NoError,
        LogDirNotFoundError,
        ReplicaNotAvailableError,
    ]


def test_reassignment_to_the_only_broker_is_done_at_once(broker, admin) -> None:
    results = admin.alter_partition_reassignments(
        {TopicPartition(TOPIC, 0): [0], TopicPartition(TOPIC, 1): [0, 1]}
    )
    assert results == {
        TopicPartition(TOPIC, 0): None,
        TopicPartition(TOPIC, 1): InvalidReplicationAssignmentError,
    }
    cancelled = admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): None})
    assert cancelled == {TopicPartition(TOPIC, 0): NoReassignmentInProgressError}
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({TOPIC: [0, 1]}) == {}


def test_describe_cluster_details(broker, admin) -> None:
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 0
    assert cluster["brokers"] == [
        {"broker_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}
    ]
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = confluent.describe_cluster(include_authorized_operations=True).result(10)
    assert described.controller.id == 0 and described.cluster_id == cluster["cluster_id"]
    assert set(described.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    }
