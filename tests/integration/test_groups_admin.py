"""Consumer group admin on a real broker: confluent-kafka's AdminClient group APIs, and
OffsetFetch's batched form and OffsetDelete over the wire."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from tests.integration.group_helpers import (
    assignments,
    consumer,
    describe_group,
    numbered,
    poll_records,
)
from tests.kit.clients import create_topic, produce
from tests.kit.wait import wait_until


def test_admin_client_group_apis(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(bootstrap, "admin-topic", 2)
    produce(bootstrap, "admin-topic", numbered(10), partitions=2)
    active = consumer(bootstrap, "active-group", **{"client.id": "the-member"})
    active.subscribe(["admin-topic"])
    poll_records(active, 10)
    active.commit(asynchronous=False)
    # a "simple" group: offsets only, committed by alter_consumer_group_offsets
    altered = admin.alter_consumer_group_offsets(
        [
            ConsumerGroupTopicPartitions(
                "offline-group",
                [TopicPartition("admin-topic", 0, 3), TopicPartition("admin-topic", 1, 4)],
            )
        ]
    )
    result = altered["offline-group"].result(10)
    assert [(tp.partition, tp.offset, tp.error) for tp in result.topic_partitions] == [
        (0, 3, None),
        (1, 4, None),
    ]
    listing = admin.list_consumer_groups().result(10)
    by_id = {group.group_id: group for group in listing.valid}
    assert {"active-group", "offline-group"} <= set(by_id)
    assert by_id["active-group"].state.name == "STABLE"
    assert by_id["offline-group"].state.name == "EMPTY"
    assert by_id["offline-group"].is_simple_consumer_group
    assert not by_id["active-group"].is_simple_consumer_group
    stable = admin.list_consumer_groups(states={by_id["active-group"].state}).result(10)
    assert [group.group_id for group in stable.valid] == ["active-group"]

    description = describe_group(admin, "active-group")
    assert description.partition_assignor == "range"
    assert assignments(description) == {"the-member": {("admin-topic", 0), ("admin-topic", 1)}}
    assert description.coordinator.id == 0
    assert describe_group(admin, "no-such-group").state.name == "DEAD"

    def offsets_of(group: str) -> list[tuple[int, int]]:
        request = [ConsumerGroupTopicPartitions(group)]
        result = admin.list_consumer_group_offsets(request)[group].result(10)
        return sorted((tp.partition, tp.offset) for tp in result.topic_partitions)

    assert offsets_of("active-group") == [(0, 5), (1, 5)]
    assert offsets_of("offline-group") == [(0, 3), (1, 4)]
    # altering the offsets of a group with members is refused (UNKNOWN_MEMBER_ID)
    refused = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("active-group", [TopicPartition("admin-topic", 0, 0)])]
    )
    try:
        error = refused["active-group"].result(10).topic_partitions[0].error
    except KafkaException as raised:
        error = raised.args[0]
    assert error is not None and error.code() == KafkaError.UNKNOWN_MEMBER_ID

    deleted = admin.delete_consumer_groups(["offline-group", "active-group"])
    assert deleted["offline-group"].result(10) is None
    with pytest.raises(Exception, match=r"(?i)non.?empty"):
        deleted["active-group"].result(10)
    assert "offline-group" not in {
        g.group_id for g in admin.list_consumer_groups().result(10).valid
    }
    assert offsets_of("offline-group") == []
    active.close()
    wait_until(lambda: describe_group(admin, "active-group").state.name == "EMPTY")
    assert admin.delete_consumer_groups(["active-group"])["active-group"].result(10) is None


def test_offset_fetch_batched_form_and_offset_delete_over_the_wire(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "wire", 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for group, offset in (("g1", 11), ("g2", 22)):
        admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition("wire", 0, offset)])]
        )[group].result(10)
    with WireClient(bootstrap) as wire:
        response = wire.request(
            OffsetFetchRequest,
            groups=(
                OffsetFetchRequestGroup(group_id="g1", topics=None),
                OffsetFetchRequestGroup(
                    group_id="g2",
                    topics=(OffsetFetchRequestTopics(name="wire", partition_indexes=(0, 1)),),
                ),
                OffsetFetchRequestGroup(group_id="nobody", topics=None),
            ),
            require_stable=True,
        )
        fetched = {
            group.group_id: [
                (topic.name, p.partition_index, p.committed_offset, p.error_code)
                for topic in group.topics
                for p in topic.partitions
            ]
            for group in response.groups
        }
        assert fetched == {
            "g1": [("wire", 0, 11, ErrorCode.none)],
            "g2": [("wire", 0, 22, ErrorCode.none), ("wire", 1, -1, ErrorCode.none)],
            "nobody": [],
        }
        response = wire.request(
            OffsetDeleteRequest,
            group_id="g1",
            topics=(
                OffsetDeleteRequestTopic(
                    name="wire", partitions=(OffsetDeleteRequestPartition(partition_index=0),)
                ),
                OffsetDeleteRequestTopic(
                    name="missing", partitions=(OffsetDeleteRequestPartition(partition_index=0),)
                ),
            ),
        )
        assert response.error_code == ErrorCode.none
        assert {(t.name, p.error_code) for t in response.topics for p in t.partitions} == {
            ("wire", ErrorCode.none),
            ("missing", ErrorCode.unknown_topic_or_partition),
        }
        missing = wire.request(OffsetDeleteRequest, group_id="nobody", topics=())
        assert missing.error_code == ErrorCode.group_id_not_found
    request = [ConsumerGroupTopicPartitions("g1")]
    assert admin.list_consumer_group_offsets(request)["g1"].result(10).topic_partitions == []
