"""Bad group requests on a real broker get Kafka's error codes, and the group they aimed
at keeps working."""

from __future__ import annotations

import datetime
import time

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from tests.integration.group_helpers import (
    FAST_GROUPS,
    committed,
    consumer,
    describe_group,
    numbered,
    poll_records,
)
from tests.kit.clients import create_topic, produce

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
