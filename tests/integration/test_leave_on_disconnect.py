"""``onceflow.group.leave.on.disconnect``: a SIGKILLed member leaves its group at once.

A subscribe() consumer with Kafka's default session timeout (45 s) is SIGKILLed; with the
setting on, the broker drops it as soon as its connection closes, so the group is empty
at once and a restarted consumer gets every partition without waiting; with it off (the
default, as in Kafka) the dead member stays in the group until its session expires.
Both group protocols: classic and KIP-848 (``group.protocol=consumer``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

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
