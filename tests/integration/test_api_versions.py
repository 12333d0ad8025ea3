"""Every API the broker serves, at every version Kafka 3.9 serves, gets a real answer.

A minimal valid request of each (API, version) goes over the raw protocol to a broker
subprocess, on a connection of its own. Its answer must decode with kio's response schema
for that version using every byte of the frame, carry the request's correlation id, and not
be an "empty success": a request naming the test topic is answered about that topic (or
with a top-level error), and a request holding entries is not answered with none. APIs
Kafka 3.9 serves that onceflow does not, and versions outside the advertised ranges, are
not advertised and close the connection, as Kafka does with a request it cannot parse.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader

from onceflow.admin.transaction_wire import DescribeTransactionsResponse
from onceflow.broker.apis import supported_apis
from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import api_name, request_class, response_class
from onceflow.testing import PluginBroker
from tests.kafka_39_apis import KAFKA_39_VERSIONS, REMOVED_NOT_SERVED
from tests.kio_hints import field_hints, nested_entity, without_none
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, encode, framed, produce

TOPIC = "versions"  # also every other name a request needs: group, member, transactional id
CORRELATION_ID = 0x5EED
SERVED = {key: (low, high) for key, _, low, high in supported_apis()}
CASES = [  # every version Kafka 3.9 serves of each API served, but those Kafka 4.0 removed
    (key, version)
    for key, (low, high) in sorted(KAFKA_39_VERSIONS.items())
    if key in SERVED
    for version in range(low, high + 1)
    if version not in REMOVED_NOT_SERVED.get(key, ())
]
NOT_SERVED = sorted(set(KAFKA_39_VERSIONS) - set(SERVED))

# Field values a minimal valid request needs, by field name, wherever the field is.
BY_NAME: dict[str, Any] = {
    "replica_id": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "timestamp": -1,  # ListOffsets: latest
    "max_num_offsets": 1,
    "current_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "session_epoch": -1,
    "generation_id": -1,
    "acks": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "num_partitions": -1,
    "replication_factor": -1,
    "resource_type": 2,  # TOPIC
    "resource_type_filter": 2,
    "pattern_type": 3,  # LITERAL
    "pattern_type_filter": 3,
    "operation": 2,  # ALL
    "permission_type": 3,  # ALLOW
    "timeout": datetime.timedelta(seconds=5),
    "timeout_ms": datetime.timedelta(seconds=5),
    "max_wait": datetime.timedelta(0),
    "session_timeout": datetime.timedelta(seconds=30),
    "rebalance_timeout": datetime.timedelta(seconds=30),
    "transaction_timeout": datetime.timedelta(seconds=60),
}
# Per API: fields that must differ from the defaults (a request must not destroy the topic).
BY_API: dict[int, dict[str, Any]] = {
    0: {"transactional_id": None},  # Produce: an idempotent-free plain write
    19: {"assignments": (), "configs": ()},  # CreateTopics: broker defaults
    20: {"name": "versions-absent", "topic_names": ("versions-absent",)},  # DeleteTopics
    26: {"committed": False},  # EndTxn
    27: {"producer_id": 4_000_000, "producer_epoch": 0},  # WriteTxnMarkers: an abort marker
    33: {"configs": ()},  # AlterConfigs: topic configs reset to defaults
    37: {"count": 8, "assignments": None},  # CreatePartitions
}
# Requests whose answer names no topic even when they ask about one.
NO_TOPIC_IN_ANSWER = {
    12,  # Heartbeat
    13,  # LeaveGroup
    14,  # SyncGroup
    17,  # SaslHandshake
    22,  # InitProducerId
    25,  # AddOffsetsToTxn
    26,  # EndTxn
    36,  # SaslAuthenticate
    11,  # JoinGroup (the topic is in opaque protocol metadata)
    47,  # OffsetDelete answers a group-level error for an unknown group
    68,  # ConsumerGroupHeartbeat
    29,  # DescribeAcls: no ACLs, nothing to describe
    31,  # DeleteAcls: nothing matched
    30,  # CreateAcls: results are per creation, without names
    50,  # DescribeUserScramCredentials
    51,  # AlterUserScramCredentials
    18,  # ApiVersions
}
NAMES_KEYS_SINCE = {10: 4}  # FindCoordinator answers per key from v4 on
# Requests whose entries filter what is listed: nothing may match.
FILTERS = {
    16,  # ListGroups (states, types)
    46,  # ListPartitionReassignments: no reassignment is ongoing
}


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    with WireClient(kafka_module_broker.bootstrap) as client:
        assert create_topic(client, TOPIC, 1)[0] == 0
        assert produce(client, TOPIC, 0, record_batch([b"v"]))[0] == 0
    return kafka_module_broker


@pytest.fixture(scope="module")
def topic_id(broker) -> uuid.UUID:
    from kio.schema.metadata.v12.request import MetadataRequest

    with WireClient(broker.bootstrap) as client:
        answer = client.request(
            MetadataRequest,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    (found,) = [t.topic_id for t in answer.topics if t.name == TOPIC]
    return found


def minimal(cls: type, api_key: int, topic_id: uuid.UUID) -> Any:
    """An instance of request entity ``cls`` with every field filled in."""
    hints = field_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        overrides = BY_API.get(api_key, {})
        if field.name in overrides:
            values[field.name] = overrides[field.name]
            continue
        hint = without_none(hints[field.name])
        kafka_type = field.metadata.get("kafka_type")
        nested = nested_entity(hint)
        if dataclasses.is_dataclass(hint):
            values[field.name] = minimal(hint, api_key, topic_id)
        elif nested is not None:
            values[field.name] = (minimal(nested, api_key, topic_id),)
        elif typing.get_origin(hint) is tuple:
            values[field.name] = (_scalar(field.name, kafka_type, topic_id),)
        else:
            values[field.name] = _scalar(field.name, kafka_type, topic_id)
    return cls(**values)


def _scalar(name: str, kafka_type: str | None, topic_id: uuid.UUID) -> Any:
    if name in BY_NAME:
        return BY_NAME[name]
    if kafka_type == "string":
        return TOPIC
    if kafka_type == "records":
        return record_batch([b"versions"])
    if kafka_type == "bytes":
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return topic_id if name == "topic_id" else uuid.UUID(int=0)
    if kafka_type is not None and kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type == "float64":
        return 0.0
    return 0


def request_frame(request: Any) -> bytes:
    return framed(encode(request, CORRELATION_ID, "versions-test"))


# Kafka answers DescribeTransactions' start time -1 when no transaction is open, which
# kio's timestamp type cannot decode; onceflow's admin code reads it with this class.
DECODED_AS = {65: DescribeTransactionsResponse}


def decode(api_key: int, version: int, frame: bytes) -> Any:
    """The response, decoded with every byte of the frame used."""
    cls = DECODED_AS.get(api_key) or response_class(api_key, version)
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    assert correlation_id == CORRELATION_ID
    offset = 4
    if cls.__flexible__ and api_key != 18:
        assert frame[offset] == 0, "response header v1 with unexpected tagged fields"
        offset += 1
    response, size = entity_reader(cls)(frame, offset)
    assert offset + size == len(frame), f"{len(frame) - offset - size} bytes left undecoded"
    return response


def mentions(value: Any, wanted: set[Any]) -> bool:
    if isinstance(value, (str, uuid.UUID)):
        return value in wanted
    if isinstance(value, tuple):
        return any(mentions(item, wanted) for item in value)
    if dataclasses.is_dataclass(value):
        return any(mentions(getattr(value, f.name), wanted) for f in dataclasses.fields(value))
    return False


def holds_entries(value: Any) -> bool:
    return any(
        isinstance(getattr(value, f.name), tuple) and getattr(value, f.name)
        for f in dataclasses.fields(value)
    )


@pytest.mark.parametrize(
    ("api_key", "version"), CASES, ids=[f"{api_name(k)}-v{v}" for k, v in CASES]
)
def test_every_served_version_gets_a_full_answer(broker, topic_id, api_key, version) -> None:
    request = minimal(request_class(api_key, version), api_key, topic_id)
    with WireClient(broker.bootstrap) as client:
        client.send_raw(request_frame(request))
        response = decode(api_key, version, client.read_frame())
    top_level_error = getattr(response, "error_code", 0)
    if holds_entries(request) and api_key not in FILTERS:
        assert holds_entries(response) or top_level_error, f"empty success: {response}"
    names_topics = api_key not in NO_TOPIC_IN_ANSWER | FILTERS and version >= NAMES_KEYS_SINCE.get(
        api_key, 0
    )
    if names_topics and mentions(request, {TOPIC, topic_id}):
        assert top_level_error or mentions(response, {TOPIC, topic_id}), (
            f"the answer does not name the topic asked about: {response}"
        )


def closed(client: WireClient) -> bool:
    try:
        client.read_frame()
    except (TimeoutError, OSError, EOFError, AssertionError):
        return True
    return False


@pytest.mark.parametrize("api_key", NOT_SERVED, ids=[api_name(k) for k in NOT_SERVED])
def test_an_api_kafka_39_serves_and_onceflow_does_not_closes_the_connection(
    broker, topic_id, api_key
) -> None:
    version = KAFKA_39_VERSIONS[api_key][1]
    while request_class(api_key, version) is None:
        version += 1  # kio models only the versions Kafka 4.x still has
    request = minimal(request_class(api_key, version), api_key, topic_id)
    with WireClient(broker.bootstrap, timeout=5) as client:
        client.send_raw(request_frame(request))
        assert closed(client)


@pytest.mark.parametrize("api_key", sorted(SERVED), ids=[api_name(k) for k in sorted(SERVED)])
def test_a_version_above_the_advertised_range_closes_the_connection(
    broker, topic_id, api_key
) -> None:
    version = SERVED[api_key][1] + 1
    cls = request_class(api_key, version) or request_class(api_key, SERVED[api_key][1])
    frame = bytearray(request_frame(minimal(cls, api_key, topic_id)))
    struct.pack_into(">h", frame, 6, version)  # the header's api version
    with WireClient(broker.bootstrap, timeout=5) as client:
        client.send_raw(bytes(frame))
        if api_key == 18:  # ApiVersions: UNSUPPORTED_VERSION and the ranges, in a v0 answer
            response = decode(18, 0, client.read_frame())
            assert response.error_code == 35
            assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == (
                SERVED
            )
        else:
            assert closed(client)
