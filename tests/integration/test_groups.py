"""Consumer groups and committed offsets against a real broker with real clients.

confluent-kafka consumer controls and admin APIs, offsets across a broker SIGKILL,
kafka-python and aiokafka groups, bad input answered with Kafka's error codes, kcat and
``onceflow groups``. The three-member rebalance scenario is in test_group_rebalance.py.
"""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
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
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from onceflow.cli import main
from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from tests.integration.group_helpers import assignments, describe_group, numbered
from tests.kit.clients import create_topic, produce
from tests.kit.wait import wait_until

FAST_GROUPS = {"group.min.session.timeout.ms": "1000"}


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,  # the broker's default group.min.session.timeout.ms
            "heartbeat.interval.ms": 300,
            "fetch.wait.max.ms": 100,
            **extra,
        }
    )


def poll_records(c: Consumer, count: int, timeout: float = 30.0) -> list:
    records = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        message = c.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        records.append(message)
    assert len(records) == count, f"got {len(records)} of {count} records"
    return records


def drain(c: Consumer, idle: float = 0.3) -> list:
    """Poll until nothing arrives for ``idle`` seconds."""
    records = []
    while (message := c.poll(idle)) is not None:
        assert message.error() is None, message.error()
        records.append(message)
    return records


def committed(c: Consumer, topic: str, partitions: int) -> list[int]:
    tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return [tp.offset for tp in tps]


# -- confluent-kafka ------------------------------------------------------------------------


def test_subscribe_poll_commit_and_consumer_controls(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "controls", 2)
    produce(bootstrap, "controls", numbered(20), partitions=2)
    c = consumer(bootstrap, "controls-group")
    c.subscribe(["controls"])
    records = poll_records(c, 20)
    assert sorted((m.partition(), m.offset()) for m in records) == sorted(
        (p, o) for p in range(2) for o in range(10)
    )
    # commit sync (per message) and async (whole position), committed() and position()
    c.commit(message=records[0], asynchronous=False)
    assert committed(c, "controls", 2)[records[0].partition()] == records[0].offset() + 1
    c.commit(asynchronous=False)
    assert committed(c, "controls", 2) == [10, 10]
    positions = c.position([TopicPartition("controls", p) for p in range(2)])
    assert [tp.offset for tp in positions] == [10, 10]
    # seek back, to the beginning and to the end
    c.seek(TopicPartition("controls", 0, 3))
    assert [m.offset() for m in poll_records(c, 7)] == list(range(3, 10))
    c.seek(TopicPartition("controls", 1, OFFSET_BEGINNING))
    assert [m.offset() for m in poll_records(c, 10)] == list(range(10))
    c.seek(TopicPartition("controls", 1, OFFSET_END))
    # OFFSET_END is resolved by the fetcher a moment later: produce until partition 1
    # delivers; none of its ten old records may come back
    produced = 20
    seen: list[tuple[int, int]] = []

    def partition_1_delivers() -> bool:
        nonlocal produced
        produce(
            bootstrap, "controls", numbered(2, produced), partitions=2
        )  # one record per partition
        produced += 2
        seen.extend((m.partition(), m.offset()) for m in drain(c))
        return any(partition == 1 for partition, _ in seen)

    wait_until(partition_1_delivers, interval=0)
    end = produced // 2  # both partitions now end here
    assert min(offset for partition, offset in seen if partition == 1) >= 10
    assert sorted(offset for partition, offset in seen if partition == 0) == list(range(10, end))
    # pause and resume
    c.pause([TopicPartition("controls", 0)])
    produce(bootstrap, "controls", numbered(4, produced), partitions=2)
    assert {(m.partition(), m.offset()) for m in poll_records(c, 2)} == {(1, end), (1, end + 1)}
    assert c.poll(0.5) is None  # partition 0 stays paused
    c.resume([TopicPartition("controls", 0)])
    assert {(m.partition(), m.offset()) for m in poll_records(c, 2)} == {(0, end), (0, end + 1)}
    c.commit(asynchronous=False)
    assert committed(c, "controls", 2) == [end + 2, end + 2]
    c.close()


def test_commit_async_with_metadata_and_auto_commit(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "auto", 3)
    produce(bootstrap, "auto", numbered(30), partitions=3)
    reports = []
    c = consumer(
        bootstrap,
        "async-group",
        on_commit=lambda error, tps: reports.append(
            (error, [(t.partition, t.offset) for t in tps])
        ),
    )
    c.assign([TopicPartition("auto", p, 0) for p in range(3)])  # assign & poll
    poll_records(c, 30)
    c.commit(
        offsets=[TopicPartition("auto", 0, 5, "checkpoint-a"), TopicPartition("auto", 2, 10)],
        asynchronous=True,
    )
    wait_until(lambda: c.poll(0.1) is None and reports)
    assert reports == [(None, [(0, 5), (2, 10)])]
    tps = c.committed([TopicPartition("auto", p) for p in range(3)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in tps] == [
        (5, "checkpoint-a"),
        (-1001, None),
        (10, None),
    ]
    c.close()

    auto = consumer(
        bootstrap, "auto-group", **{"enable.auto.commit": True, "auto.commit.interval.ms": 100}
    )
    auto.subscribe(["auto"])
    poll_records(auto, 30)
    wait_until(lambda: auto.poll(0.1) is None and committed(auto, "auto", 3) == [10, 10, 10])
    auto.close()


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


def test_committed_offsets_survive_broker_sigkill(kafka_broker_process) -> None:
    bootstrap = kafka_broker_process.bootstrap
    create_topic(bootstrap, "durable", 3)
    produce(bootstrap, "durable", numbered(30), partitions=3)
    c = consumer(bootstrap, "durable-group")
    c.subscribe(["durable"])
    poll_records(c, 30)
    c.commit(
        offsets=[
            TopicPartition("durable", 0, 4, "four"),
            TopicPartition("durable", 1, 7),
            TopicPartition("durable", 2, 10),
        ],
        asynchronous=False,
    )
    c.close()
    kafka_broker_process.restart()  # SIGKILL: no clean shutdown
    resumed = consumer(bootstrap, "durable-group")
    tps = resumed.committed([TopicPartition("durable", p) for p in range(3)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in tps] == [(4, "four"), (7, None), (10, None)]
    resumed.subscribe(["durable"])
    records = poll_records(resumed, 9)  # 6 from partition 0, 3 from partition 1
    first = {}
    for message in records:
        first.setdefault(message.partition(), message.offset())
    assert first == {0: 4, 1: 7}
    assert resumed.poll(0.5) is None
    resumed.close()


def test_group_members_carry_on_across_a_broker_sigkill(kafka_broker_factory) -> None:
    broker = kafka_broker_factory(config=FAST_GROUPS, process=True)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "carry", 2)
    produce(bootstrap, "carry", numbered(10), partitions=2)
    c = consumer(bootstrap, "carry-group", **{"session.timeout.ms": 6000})
    c.subscribe(["carry"])
    poll_records(c, 10)
    c.commit(asynchronous=False)
    broker.restart()
    produce(bootstrap, "carry", numbered(10, 10), partitions=2)
    records = poll_records(c, 10, timeout=60)
    assert sorted((m.partition(), m.offset()) for m in records) == sorted(
        (p, o) for p in range(2) for o in range(5, 10)
    )
    c.commit(asynchronous=False)
    assert committed(c, "carry", 2) == [10, 10]
    c.close()


# -- bad input ------------------------------------------------------------------------------


def join_request(group: str, **overrides) -> JoinGroupRequest:
    fields = {
        "group_id": group,
        "session_timeout": datetime.timedelta(seconds=10),
        "rebalance_timeout": datetime.timedelta(seconds=10),
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": (JoinGroupRequestProtocol(name="range", metadata=b""),),
        "reason": None,
        **overrides,
    }
    return JoinGroupRequest(**fields)


def test_bad_group_requests_get_kafkas_errors_and_the_group_keeps_working(
    kafka_broker_factory,
) -> None:
    broker = kafka_broker_factory(config=FAST_GROUPS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "guarded", 2)
    produce(bootstrap, "guarded", numbered(10), partitions=2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    good = consumer(bootstrap, "guarded-group")
    good.subscribe(["guarded"])
    poll_records(good, 10)
    good.commit(asynchronous=False)
    member_id = good.memberid()
    assert member_id

    with WireClient(bootstrap) as wire:
        unknown_type = wire.request(join_request("guarded-group", protocol_type="not-a-consumer"))
        assert unknown_type.error_code == ErrorCode.inconsistent_group_protocol
        no_type = wire.request(join_request("fresh-group", protocol_type=""))
        assert no_type.error_code == ErrorCode.inconsistent_group_protocol
        no_common = wire.request(
            join_request(
                "guarded-group",
                protocols=(JoinGroupRequestProtocol(name="my-own-assignor", metadata=b""),),
            )
        )
        assert no_common.error_code == ErrorCode.inconsistent_group_protocol
        for absurd in (datetime.timedelta(days=20), datetime.timedelta(0)):
            response = wire.request(join_request("guarded-group", session_timeout=absurd))
            assert response.error_code == ErrorCode.invalid_session_timeout
        intruder = wire.request(
            SyncGroupRequest,
            group_id="guarded-group",
            generation_id=1,
            member_id="intruder",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id="intruder", assignment=b"x"),),
        )
        assert intruder.error_code == ErrorCode.unknown_member_id
        stale = wire.request(
            OffsetCommitRequest,
            group_id="guarded-group",
            generation_id_or_member_epoch=0,  # the group is at generation 1 or later
            member_id=member_id,
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name="guarded",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=0,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
        assert stale.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
        beat = wire.request(
            HeartbeatRequest,
            group_id="guarded-group",
            generation_id=0,
            member_id=member_id,
            group_instance_id=None,
        )
        assert beat.error_code == ErrorCode.illegal_generation
        stranger = wire.request(
            HeartbeatRequest,
            group_id="guarded-group",
            generation_id=1,
            member_id="stranger",
            group_instance_id=None,
        )
        assert stranger.error_code == ErrorCode.unknown_member_id

    # the group was not disturbed: same member, still consuming and committing
    produce(bootstrap, "guarded", numbered(10, 10), partitions=2)
    poll_records(good, 10)
    good.commit(asynchronous=False)
    assert committed(good, "guarded", 2) == [10, 10]
    assert good.memberid() == member_id
    description = describe_group(admin, "guarded-group")
    assert description.state.name == "STABLE" and len(description.members) == 1
    assert "fresh-group" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}

    # librdkafka surfaces INVALID_SESSION_TIMEOUT for an absurd session timeout
    absurd = consumer(
        bootstrap,
        "absurd-group",
        **{"session.timeout.ms": 3_600_000, "max.poll.interval.ms": 3_600_000},
    )
    absurd.subscribe(["guarded"])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        message = absurd.poll(0.2)
        if message is not None and message.error():
            errors.append(message.error())
    absurd.close()
    assert errors and errors[0].code() == KafkaError.INVALID_SESSION_TIMEOUT
    good.close()


# -- other clients --------------------------------------------------------------------------


def test_kafka_python_group_join_consume_commit_rebalance(kafka_broker_factory) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    broker = kafka_broker_factory(config=FAST_GROUPS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "kp", 4)
    produce(bootstrap, "kp", numbered(40), partitions=4)

    def make() -> KafkaConsumer:
        return KafkaConsumer(
            "kp",
            bootstrap_servers=bootstrap,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=3000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )

    # kafka-python 3.0.12 drops the result of a JoinGroup/SyncGroup that completes after the
    # poll() that sent it timed out (the next poll sends a fresh JoinGroup, heartbeats stay
    # off); with short polls on a loaded machine it can stay out of its group for good. Poll
    # long enough that a join completes inside one poll.
    def drain(consumers, count: int) -> list:
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            for c in consumers:
                for records in c.poll(timeout_ms=1000).values():
                    seen += [(r.partition, r.offset) for r in records]
        return seen

    first = make()
    assert sorted(drain([first], 40)) == sorted((p, o) for p in range(4) for o in range(10))
    first.commit()
    second = make()

    def split() -> bool:
        for c in (first, second):  # nothing to read yet: these polls only drive the join
            c.poll(timeout_ms=1000)
        a, b = first.assignment(), second.assignment()
        return bool(a) and bool(b) and not (a & b) and len(a | b) == 4

    wait_until(split, timeout=60, interval=0)
    produce(bootstrap, "kp", numbered(40, 40), partitions=4)
    seen = drain([first, second], 40)
    assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(10, 20))
    first.commit()
    second.commit()
    offsets = [first.committed(KafkaPythonPartition("kp", p)) for p in range(4)]
    assert offsets == [20, 20, 20, 20]
    first.close()
    second.close()


def test_aiokafka_group_join_consume_commit_rebalance(kafka_broker_factory) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioPartition

    broker = kafka_broker_factory(config=FAST_GROUPS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "ak", 4)
    produce(bootstrap, "ak", numbered(40), partitions=4)

    async def scenario() -> None:
        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                "ak",
                bootstrap_servers=bootstrap,
                group_id="ak-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=3000,
                heartbeat_interval_ms=300,
                fetch_max_wait_ms=100,
            )

        async def drain(consumers, count: int) -> list:
            seen = []
            deadline = time.monotonic() + 30
            while len(seen) < count and time.monotonic() < deadline:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=100)
                    for records in batches.values():
                        seen += [(r.partition, r.offset) for r in records]
            return seen

        first = make()
        await first.start()
        second = make()
        try:
            assert sorted(await drain([first], 40)) == sorted(
                (p, o) for p in range(4) for o in range(10)
            )
            await first.commit()
            await second.start()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await drain([first, second], 0)
                await asyncio.gather(first.getmany(timeout_ms=100), second.getmany(timeout_ms=100))
                a, b = first.assignment(), second.assignment()
                if a and b and not (a & b) and len(a | b) == 4:
                    break
            else:
                raise AssertionError("aiokafka members never split the partitions")
            produce(bootstrap, "ak", numbered(40, 40), partitions=4)
            seen = await drain([first, second], 40)
            assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(10, 20))
            await first.commit()
            await second.commit()
            offsets = [await first.committed(AioPartition("ak", p)) for p in range(4)]
            assert offsets == [20, 20, 20, 20]
        finally:
            await first.stop()
            await second.stop()

    asyncio.run(scenario())


# -- kcat and the CLI -----------------------------------------------------------------------


def test_kcat_metadata_and_balanced_consumer(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "kc", 3)
    produce(bootstrap, "kc", numbered(30), partitions=3)
    listing = subprocess.run(
        ["kcat", "-L", "-b", bootstrap], capture_output=True, text=True, timeout=60, check=True
    )
    assert "1 brokers:" in listing.stdout
    assert 'topic "kc" with 3 partitions' in listing.stdout
    consumed = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-G",
            "kcat-group",
            "kc",
            "-X",
            "auto.offset.reset=earliest",
            "-c",
            "30",
            "-f",
            "%p:%o\\n",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    lines = sorted(line for line in consumed.stdout.splitlines() if line)
    assert lines == sorted(f"{p}:{o}" for p in range(3) for o in range(10))
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def committed_by_kcat() -> list[tuple[int, int]]:
        request = [ConsumerGroupTopicPartitions("kcat-group")]
        result = admin.list_consumer_group_offsets(request)["kcat-group"].result(10)
        return sorted((tp.partition, tp.offset) for tp in result.topic_partitions)

    assert committed_by_kcat() == [(0, 10), (1, 10), (2, 10)]


def test_onceflow_groups_cli(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "cli-topic", 2)
    produce(bootstrap, "cli-topic", numbered(20), partitions=2)
    c = consumer(bootstrap, "cli-group", **{"client.id": "cli-member"})
    c.subscribe(["cli-topic"])
    poll_records(c, 20)
    c.commit(offsets=[TopicPartition("cli-topic", 0, 4), TopicPartition("cli-topic", 1, 10)])
    runner = CliRunner()
    env = {"COLUMNS": "250"}

    listed = runner.invoke(main, ["groups", "list", "--bootstrap", bootstrap], env=env)
    assert listed.exit_code == 0, listed.output
    assert "cli-group" in listed.output and "Stable" in listed.output
    assert "range" in listed.output

    described = runner.invoke(
        main, ["groups", "describe", "cli-group", "--bootstrap", bootstrap], env=env
    )
    assert described.exit_code == 0, (described.output, described.exc_info)
    assert "cli-member" in described.output and "cli-topic[0,1]" in described.output
    assert c.memberid() in described.output

    offsets = runner.invoke(
        main, ["groups", "offsets", "cli-group", "--bootstrap", bootstrap], env=env
    )
    assert offsets.exit_code == 0, offsets.output
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in offsets.output.splitlines()
        if "cli-topic" in line
    ]
    assert [row[:5] for row in rows] == [
        ["cli-topic", "0", "4", "10", "6"],
        ["cli-topic", "1", "10", "10", "0"],
    ]
    assert "total lag: 6" in offsets.output
    c.close()
