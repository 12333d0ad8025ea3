"""Bad input over raw sockets: each gets Kafka's answer (an error code, or a closed
connection where Kafka closes it), and afterwards the broker still serves a client that
was connected all along, and the data stored before is intact."""

from __future__ import annotations

import datetime
import socket
import struct
import time

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader
from kio.static.primitive import i16, i32

from onceflow.protocol.client import WireClient
from onceflow.testing import PluginBroker
from tests.kit.batches import CRC_START, record_batch
from tests.kit.wire import create_topic, fetch, fetch_values, list_offset, metadata, produce

TOPIC = "precious"
STORED = [f"record-{n}".encode() for n in range(20)]


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    return {"socket.request.max.bytes": str(1 << 20), "max.message.bytes": "10000"}


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    with WireClient(kafka_module_broker.bootstrap) as client:
        assert create_topic(client, TOPIC, 2)[0] == 0
        for value in STORED:
            assert produce(client, TOPIC, 0, record_batch([value]))[0] == 0
    return kafka_module_broker


@pytest.fixture(scope="module")
def witness(broker):
    """A well-behaved client connected before any bad input, kept for the whole module."""
    with WireClient(broker.bootstrap) as client:
        yield client


@pytest.fixture(autouse=True)
def still_serving(broker, witness):
    yield
    # The long-lived connection still works, new connections are accepted, data intact.
    assert [v for _, v in fetch_values(witness, TOPIC)] == STORED
    with WireClient(broker.bootstrap) as fresh:
        assert produce(fresh, TOPIC, 1, record_batch([b"still-alive"]))[0] == 0
    assert broker.running  # its loop thread lives on


def raw(broker: PluginBroker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def closed_by_broker(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the broker has closed the connection (EOF or reset), reading any reply."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A request with a v1 header (no tagged fields) and an arbitrary body."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_response(sock: socket.socket) -> bytes:
    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


# -- framing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: kafka\r\n\r\n",  # size prefix of ~1.2 GB
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(100),  # a TLS ClientHello
        b"\xff\xff\xff\xff",  # negative size
        b"\x00\x00\x00\x00",  # empty request
        b"\x00\x00\x00\x03abc",  # shorter than a request header
    ],
)
def test_garbage_closes_only_that_connection(broker, garbage):
    with raw(broker) as sock:
        sock.sendall(garbage)
        assert closed_by_broker(sock)


def test_two_gigabyte_size_prefix_is_refused_without_allocating(broker):
    with raw(broker) as sock:
        sock.sendall(struct.pack(">i", 2**31 - 1) + b"\x00\x12\x00\x00")
        assert closed_by_broker(sock)
    with raw(broker) as sock:  # just above socket.request.max.bytes
        sock.sendall(struct.pack(">i", (1 << 20) + 1))
        assert closed_by_broker(sock)


def test_truncated_frame_waits_then_closes_without_blocking_others(broker, witness):
    with raw(broker) as sock:
        request = frame(18, 0, 7)
        sock.sendall(request[:-3])  # size says more than we send
        # Meanwhile everybody else is served.
        assert list_offset(witness, TOPIC, 0, -1)[:2] == (0, len(STORED))
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_broker(sock)
    with raw(broker) as sock:
        sock.sendall(b"\x00\x00")  # half a size prefix, then EOF
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_broker(sock)


def test_malformed_body_of_a_known_api_closes_the_connection(broker):
    with raw(broker) as sock:
        # Produce v3 whose body stops in the middle of its topic array.
        sock.sendall(frame(0, 3, 1, struct.pack(">hhii", -1, -1, 1000, 5)))
        assert closed_by_broker(sock)
    with raw(broker) as sock:
        # Metadata v1 claiming a million topics.
        sock.sendall(frame(3, 1, 2, struct.pack(">i", 1_000_000)))
        assert closed_by_broker(sock)


# -- API keys and versions -----------------------------------------------------------------


def test_unknown_api_key_closes_the_connection(broker):
    with raw(broker) as sock:
        sock.sendall(frame(999, 0, 1))
        assert closed_by_broker(sock)
    with raw(broker) as sock:
        sock.sendall(frame(-5, 0, 1))
        assert closed_by_broker(sock)


def test_api_versions_too_new_answers_v0_unsupported_version_with_the_table(broker):
    with raw(broker) as sock:
        sock.sendall(frame(18, 99, 42))
        response = read_response(sock)
        (correlation_id,) = struct.unpack_from(">i", response, 0)
        assert correlation_id == 42
        body, _ = entity_reader(ApiVersionsResponseV0)(response, 4)
        assert body.error_code == ErrorCode.unsupported_version
        versions = {key.api_key: (key.min_version, key.max_version) for key in body.api_keys}
        assert versions[18] == (0, 4)
        assert versions[0][1] >= 9 and versions[1][1] >= 12
        # The connection stays usable: a supported ApiVersions now succeeds.
        sock.sendall(frame(18, 0, 43))
        response = read_response(sock)
        body, _ = entity_reader(ApiVersionsResponseV0)(response, 4)
        assert body.error_code == ErrorCode.none


def test_api_the_broker_does_not_implement_closes_the_connection(broker):
    """Kafka cannot parse the header of an API it does not serve and closes the connection;
    DescribeClientQuotas is not advertised, so no client that reads ApiVersions sends it."""
    with WireClient(broker.bootstrap) as client:
        assert list_offset(client, TOPIC, 0, -2)[:2] == (0, 0)
    with raw(broker) as sock:
        sock.sendall(frame(48, 1, 7, b"\x01\x00\x00"))  # DescribeClientQuotas v1
        assert closed_by_broker(sock)


def test_version_above_the_supported_range_closes_the_connection(broker):
    """Produce v13 is modelled by kio but not advertised: Kafka closes the connection at a
    version it does not serve, never answering an empty success."""
    with raw(broker) as sock:
        sock.sendall(frame(0, 13, 9, b"\x00" * 16))
        assert closed_by_broker(sock)
    with WireClient(broker.bootstrap) as client:
        assert list_offset(client, TOPIC, 0, -1)[:2] == (0, len(STORED))  # nothing appended


# -- produce -------------------------------------------------------------------------------


def flip_crc_covered_byte(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0x01  # inside the last record: covered by the CRC
    return bytes(data)


def test_bad_records_get_kafka_error_codes(broker, witness):
    good = record_batch([b"v"])
    cases = {
        "bad crc": (flip_crc_covered_byte(good), ErrorCode.corrupt_message),
        "bad crc in attributes": (
            good[:CRC_START] + b"\x00\x07" + good[CRC_START + 2 :],
            ErrorCode.corrupt_message,
        ),
        "length beyond data": (
            good[:8] + struct.pack(">i", len(good) + 100) + good[12:],
            ErrorCode.invalid_record,
        ),
        "shorter than a header": (good[:30], ErrorCode.invalid_record),
        "empty": (b"", ErrorCode.invalid_record),
        "two batches": (good + good, ErrorCode.invalid_record),
        "magic 1": (good[:16] + b"\x01" + good[17:], ErrorCode.invalid_record),
        "too large": (
            record_batch([bytes(20_000)]),
            ErrorCode.message_too_large,
        ),
    }
    before = list_offset(witness, TOPIC, 0, -1)[1]
    with WireClient(broker.bootstrap) as client:
        for name, (records, expected) in cases.items():
            code, base_offset = produce(client, TOPIC, 0, records)
            assert (name, code) == (name, int(expected))
            assert base_offset == -1
        code, _ = produce(client, TOPIC, 0, None)  # null records
        assert code == int(ErrorCode.corrupt_message)
    assert list_offset(witness, TOPIC, 0, -1)[1] == before


def test_unknown_topic_and_bad_partitions(broker):
    batch = record_batch([b"v"])
    unknown = int(ErrorCode.unknown_topic_or_partition)
    with WireClient(broker.bootstrap) as client:
        assert produce(client, "no-such-topic", 0, batch)[0] == unknown
        assert produce(client, TOPIC, -1, batch)[0] == unknown
        assert produce(client, TOPIC, 2, batch)[0] == unknown
        assert produce(client, TOPIC, 2**31 - 1, batch)[0] == unknown
        assert fetch(client, "no-such-topic", 0)[0] == unknown
        assert fetch(client, TOPIC, -1)[0] == unknown
        assert list_offset(client, TOPIC, -1)[0] == unknown
        assert list_offset(client, "no-such-topic", 0)[0] == unknown
        assert fetch(client, TOPIC, 0, offset=10_000)[0] == int(ErrorCode.offset_out_of_range)
        assert fetch(client, TOPIC, 0, offset=-5)[0] == int(ErrorCode.offset_out_of_range)
        response = metadata(client, ["no-such-topic"], allow_auto_create=False)
        assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        response = metadata(client, ["bad name!"], allow_auto_create=True)
        assert response.topics[0].error_code == ErrorCode.invalid_topic_exception
        assert "no-such-topic" not in [t.name for t in metadata(client, None).topics]


def test_invalid_required_acks(broker):
    with WireClient(broker.bootstrap) as client:
        response = client.request(
            ProduceRequest,
            transactional_id=None,
            acks=i16(2),
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                TopicProduceData(
                    name=TOPIC,
                    partition_data=(
                        PartitionProduceData(index=i32(0), records=record_batch([b"x"])),
                    ),
                ),
            ),
        )
        (answer,) = response.responses[0].partition_responses
        assert answer.error_code == ErrorCode.invalid_required_acks


def test_acks_zero_gets_no_response_and_pipelining_keeps_order(broker, witness):
    before = list_offset(witness, TOPIC, 1, -1)[1]
    with WireClient(broker.bootstrap) as client:
        client.correlation_id = 100
        # acks=0: nothing comes back, the next response is the next request's.
        request = ProduceRequest(
            transactional_id=None,
            acks=i16(0),
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                TopicProduceData(
                    name=TOPIC,
                    partition_data=(
                        PartitionProduceData(index=i32(1), records=record_batch([b"fire"])),
                    ),
                ),
            ),
        )
        assert client.send(request) == 101
        assert list_offset(client, TOPIC, 1, -1)[0] == 0  # correlation id 102 matches
    deadline = time.monotonic() + 5
    while list_offset(witness, TOPIC, 1, -1)[1] != before + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list_offset(witness, TOPIC, 1, -1)[1] == before + 1


# -- admin ---------------------------------------------------------------------------------


def test_create_topics_refuses_bad_requests(broker):
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "rf3", replication_factor=3)[0] == int(
            ErrorCode.invalid_replication_factor
        )
        for name in ["", ".", "..", "a/b", "space name", "ü", "x" * 250]:
            code, message = create_topic(client, name)
            assert code == int(ErrorCode.invalid_topic_exception), (name, code)
            assert message
        assert create_topic(client, "cfg", configs={"no.such.config": "1"})[0] == int(
            ErrorCode.invalid_config
        )
        assert create_topic(client, "cfg", configs={"retention.ms": "forever"})[0] == int(
            ErrorCode.invalid_config
        )
        assert create_topic(client, "cfg", configs={"cleanup.policy": "shred"})[0] == int(
            ErrorCode.invalid_config
        )
        assert create_topic(client, "cfg", configs={"retention.ms": None})[0] == int(
            ErrorCode.invalid_config
        )
        assert create_topic(client, "zero", partitions=0)[0] == int(ErrorCode.invalid_partitions)
        assert create_topic(client, TOPIC)[0] == int(ErrorCode.topic_already_exists)
        assert create_topic(client, "dry", validate_only=True)[0] == 0
        names = [t.name for t in metadata(client, None).topics]
        for refused in ("rf3", "cfg", "zero", "dry", "a/b"):
            assert refused not in names
