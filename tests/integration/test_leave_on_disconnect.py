"""``onceflow.group.leave.on.disconnect``: a SIGKILLed member leaves its group at once.

A subscribe() consumer with Kafka's default session timeout (45 s) is SIGKILLed; with the
setting on, the broker drops it as soon as its connection closes, so the group is empty
at once and a restarted consumer gets every partition without waiting; with it off (the
default, as in Kafka) the dead member stays in the group until its session expires.
Both group protocols: classic and KIP-848 (``group.protocol=consumer``).
"""

from __future__ import annotations

import datetime
import signal
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import unique_name

MEMBER = """
import sys
from confluent_kafka import Consumer
settings = {"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
            "auto.offset.reset": "earliest"}
if sys.argv[4] != "classic":
    settings["group.protocol"] = sys.argv[4]
consumer = Consumer(settings)
consumer.subscribe([sys.argv[3]], on_assign=lambda c, p: print(len(p), flush=True))
while True:
    consumer.poll(0.1)
"""


def start_member(bootstrap: str, group: str, topic: str, protocol: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", MEMBER, bootstrap, group, topic, protocol],
        stdout=subprocess.PIPE,
        text=True,
    )


def assigned(member: subprocess.Popen, timeout: float) -> int:
    """The number of partitions in the member's first assignment line."""
    assert member.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = member.stdout.readline()
        if line.strip():
            return int(line)
    raise AssertionError("the member got no assignment")


def members(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group])[group].result(10)
    if description.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return 0
    return len(description.members)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("leave", [True, False], ids=["leave-on-disconnect", "kafka-default"])
def test_a_killed_member_leaves_at_once_only_with_the_setting(
    kafka_broker_factory, kafka_topic_factory, protocol: str, leave: bool
) -> None:
    config = {"onceflow.group.leave.on.disconnect": "true"} if leave else {}
    broker = kafka_broker_factory(config)
    topic = kafka_topic_factory(partitions=3, broker=broker)
    group = unique_name("leave")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    first = start_member(broker.bootstrap, group, topic, protocol)
    try:
        assert assigned(first, 30) == 3
        assert members(admin, group) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    time.sleep(1.0)  # the broker has seen the connection close
    if not leave:
        assert members(admin, group) == 1  # until its session expires (45 s)
        return
    assert members(admin, group) == 0
    second = start_member(broker.bootstrap, group, topic, protocol)
    try:
        assert assigned(second, 5) == 3  # at once, not after the dead member's session
    finally:
        second.kill()
        second.wait()


def test_a_member_killed_while_its_join_is_parked_leaves_when_the_join_completes(
    kafka_broker_factory, kafka_topic_factory
) -> None:
    """A JoinGroup waits for the rebalance to complete; a member whose connection closes
    meanwhile is made when it completes, on a connection already gone: it leaves then (the
    connection's end waits for its answers), not after its session."""
    broker = kafka_broker_factory({"onceflow.group.leave.on.disconnect": "true"})
    topic = kafka_topic_factory(partitions=3, broker=broker)
    group = unique_name("parked")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    first = start_member(broker.bootstrap, group, topic, "classic")
    try:
        assert assigned(first, 30) == 3
        parked = WireClient(broker.bootstrap)
        asked = parked.request(join_request(group, topic))  # Kafka's answer: join again with an id
        assert asked.error_code == ErrorCode.member_id_required
        parked.send(join_request(group, topic, member_id=asked.member_id))  # parked until `first`
        time.sleep(0.5)  # rejoins, at its next heartbeat (3 s at most)
        parked.close()
        deadline = time.monotonic() + 15  # the parked member's session is 30 s
        while members(admin, group) != 1 or not stable(admin, group):
            assert time.monotonic() < deadline, "the parked member is still in the group"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


def join_request(group: str, topic: str, member_id: str = "") -> JoinGroupRequest:
    """A consumer's JoinGroup, its subscription to ``topic`` (ConsumerProtocolSubscription
    v0: version, topics, no user data)."""
    name = topic.encode()
    subscription = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)
    return JoinGroupRequest(
        group_id=group, session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription),),
        reason=None,
    )  # fmt: skip


def stable(admin: AdminClient, group: str) -> bool:
    description = admin.describe_consumer_groups([group])[group].result(10)
    return description.state == ConsumerGroupState.STABLE
