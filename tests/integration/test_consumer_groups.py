"""KIP-848 consumer groups (``group.protocol=consumer``): librdkafka consumers sharing
partitions with the uniform and range assignors, and the exact protocol rules (member
epochs, revocation before reassignment, offset commits fenced by epoch, classic and
consumer members refused in each other's groups) over the wire. One broker per module."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.static.primitive import i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import PluginBroker
from tests.kit.clients import new_topic, produce

HEARTBEAT_MS = 300
SESSION_MS = 3000

# One broker for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("consumer-groups")


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    return {
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "group.consumer.session.timeout.ms": str(SESSION_MS),
    }


@pytest.fixture(scope="module")
def admin(broker: PluginBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "log_level": 3,
            **extra,
        }
    )


def poll_until(consumers: list[Consumer], done, seconds: float = 20) -> list:
    messages = []
    deadline = time.monotonic() + seconds
    while not done(messages):
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        for each in consumers:
            message = each.poll(0.05)
            if message is not None and message.error() is None:
                messages.append(message)
    return messages


def owned(each: Consumer) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for tp in each.assignment())


# -- librdkafka with group.protocol=consumer --------------------------------------------


def test_two_consumers_share_the_partitions_evenly(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "kip848", 4)
    produce(broker.bootstrap, topic, [str(n) for n in range(40)], partitions=4)
    group = f"uniform-{uuid.uuid4().hex[:6]}"
    first = consumer(broker.bootstrap, group, **{"enable.auto.commit": False})
    first.subscribe([topic])
    seen = poll_until([first], lambda got: len(got) == 40)
    assert sorted(int(m.value()) for m in seen) == list(range(40))
    first.commit(asynchronous=False)
    second = consumer(broker.bootstrap, group)
    second.subscribe([topic])
    poll_until([first, second], lambda _: len(owned(first)) == 2 and len(owned(second)) == 2)
    assert sorted(owned(first) + owned(second)) == [(topic, p) for p in range(4)]

    description = admin.describe_consumer_groups([group])[group].result(10)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state.name == "STABLE"
    assert len(description.members) == 2
    assert sorted(
        (tp.topic, tp.partition)
        for member in description.members
        for tp in member.assignment.topic_partitions
    ) == [(topic, p) for p in range(4)]

    second.close()  # leaves: its partitions go back to the first consumer
    poll_until([first], lambda _: len(owned(first)) == 4)
    first.close()


def test_range_assignor_keeps_topics_co_partitioned(broker, admin) -> None:
    left, right = new_topic(broker.bootstrap, "kip848", 3), new_topic(broker.bootstrap, "kip848", 3)
    group = f"range-{uuid.uuid4().hex[:6]}"
    members = [
        consumer(broker.bootstrap, group, **{"group.remote.assignor": "range"}) for _ in range(2)
    ]
    for each in members:
        each.subscribe([left, right])
    poll_until(members, lambda _: sorted(len(owned(each)) for each in members) == [2, 4])
    for each in members:
        numbers = {topic: {p for t, p in owned(each) if t == topic} for topic in (left, right)}
        assert numbers[left] == numbers[right] and numbers[left]
    assert sorted(len(owned(each)) for each in members) == [2, 4]
    description = admin.describe_consumer_groups([group])[group].result(10)
    assert description.type == ConsumerGroupType.CONSUMER
    for each in members:
        each.close()


def test_a_silent_member_is_removed_after_the_session_timeout(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "kip848", 2)
    group = f"silent-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as client:
        member = Member(client, group, [topic])
        assert member.join().error_code == ErrorCode.none
    started = time.monotonic()
    while admin.describe_consumer_groups([group])[group].result(10).members:
        assert time.monotonic() - started < SESSION_MS / 1000 + 2
        time.sleep(0.1)
    assert time.monotonic() - started >= SESSION_MS / 1000 - 0.5


# -- the protocol, request by request ---------------------------------------------------


class Member:
    """One KIP-848 member speaking ConsumerGroupHeartbeat v1 itself."""

    def __init__(
        self, client: WireClient, group: str, topics: list[str], instance: str | None = None
    ) -> None:
        self.client, self.group, self.topics, self.instance = client, group, topics, instance
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}

    def heartbeat(self, full: bool = False, epoch: int | None = None):
        joining = self.epoch == 0
        response = self.client.request(
            ConsumerGroupHeartbeatRequest,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=i32(self.epoch if epoch is None else epoch),
            instance_id=self.instance,
            rack_id=None,
            rebalance_timeout=datetime.timedelta(seconds=30 if joining or full else -0.001),
            subscribed_topic_names=tuple(self.topics) if joining or full else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=tuple(
                TopicPartitions(topic_id=topic, partitions=numbers)
                for topic, numbers in self.owned.items()
            ),
        )
        if response.error_code == ErrorCode.none and epoch is None:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.owned = {
                    t.topic_id: tuple(t.partitions) for t in response.assignment.topic_partitions
                }
        return response

    join = heartbeat

    def partitions(self) -> list[int]:
        return sorted(p for numbers in self.owned.values() for p in numbers)


def test_partitions_move_only_after_their_owner_revokes_them(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "kip848", 4)
    group = f"revoke-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as one, WireClient(broker.bootstrap) as two:
        first, second = Member(one, group, [topic]), Member(two, group, [topic])
        first.join()
        assert (first.epoch, first.partitions()) == (1, [0, 1, 2, 3])
        second.join()  # epoch 2: the target splits the partitions, none is free yet
        assert (second.epoch, second.partitions()) == (2, [])
        response = first.heartbeat()  # told to keep two; still at epoch 1 until it revokes
        assert (response.member_epoch, len(first.partitions())) == (1, 2)
        assert second.heartbeat().assignment is None  # still unreleased
        first.heartbeat()  # now it owns only two: epoch 2
        assert first.epoch == 2
        second.heartbeat()
        assert sorted(first.partitions() + second.partitions()) == [0, 1, 2, 3]
        assert len(second.partitions()) == 2

        stale = first.heartbeat(epoch=first.epoch + 1)
        assert stale.error_code == ErrorCode.fenced_member_epoch
        unknown = Member(one, group, [topic])
        unknown.epoch = 5
        assert unknown.heartbeat().error_code == ErrorCode.unknown_member_id

        def commit(member_id: str, epoch: int) -> ErrorCode:
            answer = one.request(
                OffsetCommitRequest,
                group_id=group,
                generation_id_or_member_epoch=i32(epoch),
                member_id=member_id,
                group_instance_id=None,
                topics=(
                    OffsetCommitRequestTopic(
                        name=topic,
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=i32(0),
                                committed_offset=i64(0),
                                committed_leader_epoch=i32(-1),
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            )
            return answer.topics[0].partitions[0].error_code

        assert commit(first.member_id, first.epoch) == ErrorCode.none
        assert commit(first.member_id, first.epoch - 1) == ErrorCode.stale_member_epoch
        assert commit("nobody", first.epoch) == ErrorCode.unknown_member_id

        first.heartbeat(epoch=-1)  # leaves
        assert second.heartbeat().member_epoch == 3
        assert second.partitions() == [0, 1, 2, 3]


def test_classic_and_consumer_members_stay_apart(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "kip848", 1)
    group = f"mixed-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as client:
        assert Member(client, group, [topic]).join().error_code == ErrorCode.none
        joined = client.request(
            JoinGroupRequest,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        )
        assert joined.error_code == ErrorCode.group_id_not_found

    classic_group = f"classic-{uuid.uuid4().hex[:6]}"
    classic = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": classic_group, "log_level": 3}
    )
    classic.subscribe([topic])
    poll_until([classic], lambda _: bool(classic.assignment()))
    with WireClient(broker.bootstrap) as client:
        refused = Member(client, classic_group, [topic]).join()
        assert refused.error_code == ErrorCode.group_id_not_found
    classic.close()


def test_a_static_member_gets_its_partitions_back(broker, admin) -> None:
    topic = new_topic(broker.bootstrap, "kip848", 4)
    group = f"static-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as one, WireClient(broker.bootstrap) as two:
        first = Member(one, group, [topic], instance="instance-a")
        other = Member(two, group, [topic])
        first.join()
        other.join()
        first.heartbeat()
        first.heartbeat()
        other.heartbeat()
        mine = first.partitions()
        assert len(mine) == 2
        # the same instance cannot join twice while the first is in the group
        twin = Member(two, group, [topic], instance="instance-a")
        assert twin.join().error_code == ErrorCode.unreleased_instance_id
        assert first.heartbeat(epoch=-2).member_epoch == -2  # leaves for a moment
        back = Member(two, group, [topic], instance="instance-a")
        assert back.join().error_code == ErrorCode.none
        assert back.partitions() == mine
