"""Versions Kafka 4.0 removed and Kafka 3.9 still serves, answered as a KRaft Kafka 3.9
answers them: CreateTopics v0, DeleteTopics v0, DescribeConfigs v0 (is_default instead of
a config source), OffsetCommit v1 (stored as later versions store it) and OffsetCommit /
OffsetFetch v0 (ZooKeeper's, so UNSUPPORTED_VERSION)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import build, element, request_class
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import PluginBroker

TOPIC = "removed-versions"  # made by the fixture: each test runs alone (pytest-xdist)
CREATED = "removed-versions-created"
GROUP = "removed-versions-group"


@pytest.fixture(scope="module")
def client(kafka_module_broker: PluginBroker) -> Iterator[WireClient]:
    admin = AdminClient({"bootstrap.servers": kafka_module_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    with WireClient(kafka_module_broker.bootstrap) as client:
        yield client


def nested(api_key: int, version: int, *path: str) -> list[type]:
    classes = [request_class(api_key, version)]
    for name in path:
        classes.append(element(classes[-1], name))
    return classes


def test_create_and_delete_topics_v0(client) -> None:
    request, topic = nested(19, 0, "topics")
    created = client.request(
        request,
        topics=(
            build(
                topic,
                name=CREATED,
                num_partitions=2,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
            build(
                topic,
                name="bad/name",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=datetime.timedelta(seconds=5),
    )
    assert [(t.name, t.error_code) for t in created.topics] == [
        (CREATED, ErrorCode.none),
        ("bad/name", ErrorCode.invalid_topic_exception),
    ]
    deleted = client.request(
        request_class(20, 0),
        topic_names=("removed-versions-absent",),
        timeout=datetime.timedelta(seconds=5),
    )
    assert [(t.name, t.error_code) for t in deleted.responses] == [
        ("removed-versions-absent", ErrorCode.unknown_topic_or_partition)
    ]


def test_describe_configs_v0_says_whether_a_value_is_the_default(client) -> None:
    request, resource = nested(32, 0, "resources")
    described = client.request(
        request,
        resources=(
            build(
                resource,
                resource_type=2,
                resource_name=TOPIC,
                configuration_keys=("cleanup.policy",),
            ),
        ),
    )
    (result,) = described.results
    assert result.error_code == ErrorCode.none
    (config,) = result.configs
    assert (config.name, config.value, config.is_default) == ("cleanup.policy", "delete", True)


def commit(client: WireClient, version: int, offset: int) -> ErrorCode:
    request, topic, partition = nested(8, version, "topics", "partitions")
    answer = client.request(
        request,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=(
            build(
                topic,
                name=TOPIC,
                partitions=(
                    build(
                        partition,
                        partition_index=0,
                        committed_offset=offset,
                        commit_timestamp=-1,
                        committed_metadata="m",
                    ),
                ),
            ),
        ),
    )
    return answer.topics[0].partitions[0].error_code


def fetch_offset(client: WireClient, version: int) -> tuple[ErrorCode, int]:
    request, topic = nested(9, version, "topics")
    answer = client.request(
        request, group_id=GROUP, topics=(build(topic, name=TOPIC, partition_indexes=(0,)),)
    )
    partition = answer.topics[0].partitions[0]
    return partition.error_code, partition.committed_offset


def test_offset_commit_v1_is_stored_and_v0_is_zookeepers(client) -> None:
    assert commit(client, 1, 7) == ErrorCode.none
    assert fetch_offset(client, 1) == (ErrorCode.none, 7)
    assert commit(client, 0, 9) == ErrorCode.unsupported_version
    assert fetch_offset(client, 0)[0] == ErrorCode.unsupported_version
    assert fetch_offset(client, 1) == (ErrorCode.none, 7)
