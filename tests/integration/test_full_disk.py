"""A full disk with a real broker and real clients: RLIMIT_FSIZE on the broker process
fails its writes with EFBIG exactly as a full disk fails them with ENOSPC. Every request
the disk refuses answers an error (produce: KAFKA_STORAGE_ERROR), nothing acknowledged is
lost, and once the limit is lifted (in place, or by a restart) clients finish their work:
every acknowledged record readable exactly once and in order."""

from __future__ import annotations

import resource
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import BrokerProcess
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, fetch_values, produce

pytestmark = pytest.mark.xdist_group("full-disk")

UNLIMITED = resource.RLIM_INFINITY


def limit_file_size(broker: BrokerProcess, size: int | None) -> None:
    """Set (or with None lift) the broker's RLIMIT_FSIZE in place, like `prlimit --fsize`."""
    soft = UNLIMITED if size is None else size
    resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (soft, UNLIMITED))


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data").start()
    yield process
    process.stop()


def segment_size(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    (segment,) = sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))[-1:]
    return segment.stat().st_size


def settled_segment_size(broker: BrokerProcess, topic: str, samples: int = 20) -> int:
    """The segment's size between failed writes: the smallest of samples 20 ms apart.

    The producer's retries keep writing while the disk is full; each short write grows the
    file to the limit for the moment before the broker cuts it back, and a single stat can
    land in that moment. A write that was never cut back is in every sample.
    """
    sizes = []
    for _ in range(samples):
        sizes.append(segment_size(broker, topic))
        time.sleep(0.02)
    return min(sizes)


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[bytes]:
    with WireClient(bootstrap) as client:
        if isolation == "read_uncommitted":
            return [value for _, value in fetch_values(client, topic)]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == -191:  # end of partition
                break
            continue
        values.append(message.value())
    consumer.close()
    return values


def idempotent_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 20,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
        }
    )


def produce_numbered(producer: Producer, topic: str, numbers: range, acked: list[bytes]) -> None:
    def delivered(error, message) -> None:
        if error is None:
            acked.append(message.value())

    for number in numbers:
        producer.produce(
            topic,
            value=f"record-{number:05d}-{'x' * 150}".encode(),
            partition=0,
            on_delivery=delivered,
        )
        producer.poll(0)


@pytest.mark.parametrize("lift", ["in-place", "restart"])
def test_acks_all_produce_on_a_full_disk_loses_nothing(broker, lift):
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "full")[0] == 0
    producer = idempotent_producer(broker.bootstrap)
    acked: list[bytes] = []
    produce_numbered(producer, "full", range(200), acked)
    assert producer.flush(30) == 0 and len(acked) == 200

    limit_file_size(broker, segment_size(broker, "full") + 20_000)
    produce_numbered(producer, "full", range(200, 700), acked)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(acked) < 300:  # some fit before the limit
        producer.poll(0.1)
    time.sleep(1.0)
    producer.poll(0)
    stuck_at = len(acked)
    assert 200 < stuck_at < 700, f"{stuck_at} acknowledged: the limit did not bite"

    # While the disk is full, a produce answers KAFKA_STORAGE_ERROR and writes nothing.
    size = settled_segment_size(broker, "full")
    with WireClient(broker.bootstrap) as client:
        code, _ = produce(client, "full", 0, record_batch([b"y" * 30_000]))
    assert code == ErrorCode.kafka_storage_error
    assert settled_segment_size(broker, "full") == size
    assert len(read_all(broker.bootstrap, "full")) == len(acked)

    if lift == "in-place":
        limit_file_size(broker, None)
    else:
        broker.restart(kill=True)
    assert producer.flush(60) == 0
    expected = [f"record-{n:05d}-{'x' * 150}".encode() for n in range(700)]
    assert acked == expected
    assert read_all(broker.bootstrap, "full") == expected
    broker.restart(kill=True)
    assert read_all(broker.bootstrap, "full") == expected
    log = broker.log_path.read_text()
    assert ("File too large" in log and "writes succeed again" in log) or lift == "restart"


def test_offset_commit_on_a_full_disk_fails_then_succeeds(broker):
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "offsets-full")[0] == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "full-group",
            "enable.auto.commit": False,
        }
    )
    partition = TopicPartition("offsets-full", 0, 10)
    consumer.commit(offsets=[partition], asynchronous=False)
    limit_file_size(broker, 1)  # every file is past the limit: no append succeeds
    with pytest.raises(KafkaException) as error:
        consumer.commit(offsets=[TopicPartition("offsets-full", 0, 20)], asynchronous=False)
    assert error.value.args[0].code() in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        -185,
    )
    (committed,) = consumer.committed([TopicPartition("offsets-full", 0)], timeout=10)
    assert committed.offset == 10  # the refused commit left no trace, even in memory
    limit_file_size(broker, None)
    consumer.commit(offsets=[TopicPartition("offsets-full", 0, 30)], asynchronous=False)
    consumer.close()
    broker.restart(kill=True)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "full-group"})
    (committed,) = consumer.committed([TopicPartition("offsets-full", 0)], timeout=10)
    assert committed.offset == 30
    consumer.close()


def test_a_transaction_committed_on_a_full_disk_commits_once_when_space_returns(broker):
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "txn-full")[0] == 0
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "full-txn",
            "transaction.timeout.ms": 60_000,
            "metadata.recovery.strategy": "none",
        }
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    values = [f"txn-{n}".encode() for n in range(10)]
    for value in values:
        producer.produce("txn-full", value=value, partition=0)
    producer.flush(10)
    limit_file_size(broker, 1)
    outcome: list[object] = []

    def commit() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                producer.commit_transaction(5)
                outcome.append("committed")
                return
            except KafkaException as error:
                if not error.args[0].retriable():
                    outcome.append(error)
                    return

    committer = threading.Thread(target=commit)
    committer.start()
    time.sleep(2.0)
    assert not outcome, "the commit completed while nothing could be written"
    assert read_all(broker.bootstrap, "txn-full", "read_committed") == []
    limit_file_size(broker, None)
    committer.join(70)
    assert outcome == ["committed"]
    assert read_all(broker.bootstrap, "txn-full", "read_committed") == values
    broker.restart(kill=True)
    assert read_all(broker.bootstrap, "txn-full", "read_committed") == values
