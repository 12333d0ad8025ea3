"""A partition taken offline by damage below the recovery point is visible everywhere.

A real broker writes ten acknowledged records to each partition of ``orders`` and stops
cleanly. Then one batch of ``orders-1`` is damaged in one of two ways:

- ``header``: a flipped byte of its base offset, which the start-up scan finds (it checks
  every header);
- ``crc``: a flipped byte in its records, which only a read finds (start-up checks CRCs
  after the recovery point only, as Kafka does).

Once found: one ERROR line names the partition, the file and the byte; Metadata answers
the partition with KAFKA_STORAGE_ERROR and its replica offline, DescribeLogDirs flags the
data directory; a fetch answers CORRUPT_MESSAGE and serves nothing, not even the
undamaged prefix; a confluent-kafka consumer gets that error from ``poll()`` (librdkafka
calls it INVALID_MSG) and a producer's delivery report fails with _MSG_TIMED_OUT;
``topics describe``, ``verify`` and ``log check`` name the cause in words.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka.admin import KafkaAdminClient

from onceflow.cli import main
from onceflow.log.batch import parse_header
from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import BrokerProcess
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, fetch, list_offset, produce

pytestmark = pytest.mark.xdist_group("offline-partition")

TOPIC = "orders"
RECORDS = 10
DAMAGED_BATCH = 3


def event(partition: int, number: int) -> bytes:
    return json.dumps({"id": f"{partition}-{number}"}).encode()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A data directory with RECORDS one-record batches in each of two partitions, all
    acknowledged and below the recovery point (a clean stop)."""
    root = tmp_path_factory.mktemp("offline-pristine")
    broker = BrokerProcess(root / "data").start()
    try:
        with WireClient(broker.bootstrap) as client:
            assert create_topic(client, TOPIC, 2)[0] == 0
            for number in range(RECORDS):
                for partition in range(2):
                    batch = record_batch([event(partition, number)])
                    assert produce(client, TOPIC, partition, batch)[0] == 0
    finally:
        broker.stop()
    return root / "data"


def damage(data_dir: Path, kind: str) -> tuple[Path, int]:
    """Flip one byte of batch DAMAGED_BATCH of orders-1; the file and the batch's byte."""
    path = data_dir / f"{TOPIC}-1" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    position = 0
    for _ in range(DAMAGED_BATCH):
        position += parse_header(data, position).size
    if kind == "header":
        data[position + 7] ^= 0xFF  # the base offset's low byte: not covered by the CRC
    else:
        data[position + parse_header(data, position).size - 1] ^= 0xFF  # a record's byte
    path.write_bytes(bytes(data))
    return path, position


def offline_lines(broker: BrokerProcess) -> list[str]:
    return [
        line
        for line in broker.log_path.read_text().splitlines()
        if f"partition {TOPIC}-1 is offline" in line
    ]


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def consume_until_offline(
    bootstrap: str, settle_s: float = 0.5, timeout_s: float = 30.0
) -> tuple[dict[int, list[int]], list[KafkaError], dict]:
    """What a real consumer of both partitions gets: offsets per partition and the errors
    ``poll()`` returned, polled until orders-0 is read whole, an error came and the
    consumer's Metadata shows orders-1 offline, then ``settle_s`` more; and that
    Metadata's partitions."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "offline-reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    offsets: dict[int, list[int]] = {0: [], 1: []}
    errors: list[KafkaError] = []
    deadline = time.monotonic() + timeout_s
    settled_at = None
    try:
        while settled_at is None or time.monotonic() < settled_at:
            assert time.monotonic() < deadline, f"still not offline: read {offsets}"
            message = consumer.poll(0.1)
            if message is not None and message.error():
                errors.append(message.error())
            elif message is not None:
                offsets[message.partition()].append(message.offset())
            if settled_at is None and len(offsets[0]) == RECORDS and errors:
                seen = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
                if seen[1].error is not None:
                    settled_at = time.monotonic() + settle_s
    finally:
        consumer.close()
    return offsets, errors, seen


def deliver(bootstrap: str, partition: int, timeout_ms: int) -> KafkaError | None:
    """The delivery report's error of one record produced to ``partition``."""
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": timeout_ms})
    producer.produce(TOPIC, b"{}", partition=partition, on_delivery=lambda e, _: reports.append(e))
    producer.flush(timeout_ms / 1000 + 10)
    assert len(reports) == 1
    return reports[0]


@pytest.mark.parametrize("kind", ["header", "crc"])
def test_an_offline_partition_is_visible_to_clients_tools_and_the_operator(
    pristine, tmp_path, kind
):
    shutil.copytree(pristine, tmp_path / "data")
    path, position = damage(tmp_path / "data", kind)
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        if kind == "header":  # found by the start-up scan, before any client came
            (line,) = offline_lines(broker)
            assert "found at start-up" in line
        else:
            assert offline_lines(broker) == []  # found on first read

        offsets, errors, seen = consume_until_offline(broker.bootstrap)
        assert offsets[0] == list(range(RECORDS))  # the other partition serves on
        # Nothing of orders-1, not even the undamaged offsets 0-2 before the damage (the
        # header scan found it at start-up; a CRC mismatch is found by the first fetch,
        # which reads from offset 0 through the damage).
        assert offsets[1] == []
        # The fetch's CORRUPT_MESSAGE reaches poll() (librdkafka would retry a fetch's
        # KAFKA_STORAGE_ERROR, or a partition without a leader, in silence).
        assert errors, "the consumer was told nothing"
        for error in errors:
            assert error.code() == KafkaError.INVALID_MSG  # code 2, Kafka's CORRUPT_MESSAGE
            assert "Fetch from broker 0 failed at offset 0" in error.str()
        assert seen[0].error is None and seen[0].leader == 0
        assert seen[1].leader == 0  # still led here: clients keep asking and are told
        assert seen[1].error.code() == KafkaError.KAFKA_STORAGE_ERROR

        (line,) = offline_lines(broker)  # once, however many reads came
        assert " ERROR " in line and f"{path} at byte {position}" in line
        assert "acknowledged" in line and "onceflow log check --repair" in line

        assert deliver(broker.bootstrap, 0, 30_000) is None
        assert deliver(broker.bootstrap, 1, 1500).code() == KafkaError._MSG_TIMED_OUT

        with WireClient(broker.bootstrap) as client:
            # The undamaged prefix is not served: an offline partition serves nothing.
            assert fetch(client, TOPIC, 1, 0, max_bytes=1)[0] == ErrorCode.corrupt_message
            assert list_offset(client, TOPIC, 1)[0] == ErrorCode.kafka_storage_error
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            (answer,) = admin.describe_log_dirs({TOPIC: [0, 1]})
        finally:
            admin.close()
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == ErrorCode.kafka_storage_error
        (listed,) = log_dir["topics"]
        assert [p["partition_index"] for p in listed["partitions"]] == [0]

        described = cli("topics", "describe", TOPIC, "--bootstrap", broker.bootstrap)
        assert described.exit_code == 0, described.output
        rows = [row.split() for row in described.output.splitlines() if f"│ {TOPIC} " in row]
        assert [row[3:4] + row[-2:-1] for row in rows] == [["0", "online"], ["1", "offline"]]
        assert rows[1][5] == "0"  # leader
        assert f"{TOPIC}-1: offline: KAFKA_STORAGE_ERROR: the broker cannot read" in (
            described.output
        )

        verified = cli(
            "verify",
            "--input",
            TOPIC,
            "--id-field",
            "value:id",
            "--output-topic",
            TOPIC,
            "--bootstrap",
            broker.bootstrap,
            "--timeout",
            "20",
        )
        assert verified.exit_code == 2, verified.output  # could not check
        assert f"partition {TOPIC}-1 is offline: KAFKA_STORAGE_ERROR" in verified.output
        assert "error 56" not in verified.output
    finally:
        broker.stop()

    checked = cli("log", "check", "--data-dir", str(tmp_path / "data"))
    assert checked.exit_code == 1
    cause = {
        "header": f"batch with offset {DAMAGED_BATCH ^ 0xFF} where offset {DAMAGED_BATCH} was",
        "crc": f"CRC mismatch in the batch at offset {DAMAGED_BATCH}",
    }[kind]
    assert f"{TOPIC}-1: damaged: {path.name}: {cause}" in checked.output, checked.output
    assert f"at byte {position}" in checked.output


def test_a_segment_that_only_looks_old_is_not_deleted_by_time(tmp_path):
    """retention.ms deletes a segment by its batches' timestamps, which are not CRC-checked
    below the recovery point: damage that makes fresh records look old is found first."""
    config = {"log.retention.check.interval.ms": "100"}
    broker = BrokerProcess(tmp_path / "data", config=config).start()
    try:
        with WireClient(broker.bootstrap) as client:
            topic_configs = {"segment.bytes": "200", "retention.ms": str(3600 * 1000)}
            assert create_topic(client, "fresh", 1, configs=topic_configs)[0] == 0
            for number in range(RECORDS):
                assert produce(client, "fresh", 0, record_batch([event(0, number)]))[0] == 0
    finally:
        broker.stop()
    first = sorted((tmp_path / "data" / "fresh-0").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    position = 0
    while position < len(data):  # every batch of the first segment dated 1970
        data[position + 35 : position + 43] = bytes(8)  # maxTimestamp, under the CRC
        position += parse_header(data, position).size
    first.write_bytes(bytes(data))

    broker.start()
    try:
        deadline = time.monotonic() + 30
        while not offline_lines_of(broker, "fresh-0") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # a few more retention rounds
        (line,) = offline_lines_of(broker, "fresh-0")
        assert "before deleting the segment by time (retention.ms)" in line
        assert f"{first} at byte 0" in line and "nothing was deleted" in line
        assert first.read_bytes() == bytes(data)
        with WireClient(broker.bootstrap) as client:
            assert list_offset(client, "fresh", 0, -2)[0] == ErrorCode.kafka_storage_error
    finally:
        broker.stop()


def offline_lines_of(broker: BrokerProcess, name: str) -> list[str]:
    return [
        line
        for line in broker.log_path.read_text().splitlines()
        if f"partition {name} is offline" in line
    ]
