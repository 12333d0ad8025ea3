"""Transactions and read_committed with real clients against a real broker process."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from onceflow.log.batch import iter_headers, read_key_values
from onceflow.protocol.client import WireClient
from tests.kit.clients import create_topic

FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def transactional_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 1,
            **extra,
        }
    )
    producer.init_transactions(15)
    return producer


def read_values(
    bootstrap: str,
    topic: str,
    isolation: str,
    until: int | None = None,
    seconds: float = 5.0,
    partitions: int = 1,
) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (until is None or len(values) < until):
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                values.append(message.value())
    consumer.close()
    return values


def send(producer: Producer, topic: str, values: list[str]) -> None:
    for value in values:
        producer.produce(topic, value=value.encode())
    producer.flush(10)


def test_commit_abort_commit_visibility(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "tx")
    producer = transactional_producer(bootstrap, "txn-visibility")
    producer.begin_transaction()
    send(producer, "tx", ["a1", "a2"])
    producer.commit_transaction(10)
    producer.begin_transaction()
    send(producer, "tx", ["b1", "b2", "b3"])
    producer.abort_transaction(10)
    producer.begin_transaction()
    send(producer, "tx", ["c1"])
    producer.commit_transaction(10)

    committed = read_values(bootstrap, "tx", "read_committed", until=3)
    assert committed == [b"a1", b"a2", b"c1"]
    everything = read_values(bootstrap, "tx", "read_uncommitted", until=6)
    assert everything == [b"a1", b"a2", b"b1", b"b2", b"b3", b"c1"]


def test_read_committed_waits_at_last_stable_offset(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "lso")
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    send(plain, "lso", ["before"])
    producer = transactional_producer(bootstrap, "txn-lso")
    producer.begin_transaction()
    send(producer, "lso", ["open1", "open2"])
    send(plain, "lso", ["after-open"])  # behind the open transaction: must wait too

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "lso-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("lso", 0, 0)])
    seen = []
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        seen += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
    assert seen == [b"before"], "read_committed must stop at the LSO"
    _, stable = consumer.get_watermark_offsets(TopicPartition("lso", 0), cached=False)
    assert stable == 1, "ListOffsets latest under read_committed is the last stable offset"

    producer.commit_transaction(10)
    deadline = time.monotonic() + 10
    while len(seen) < 4 and time.monotonic() < deadline:
        seen += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
    consumer.close()
    assert seen == [b"before", b"open1", b"open2", b"after-open"]


def test_second_producer_fences_first_and_aborts_its_transaction(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "fence")
    first = transactional_producer(bootstrap, "txn-fence")
    first.begin_transaction()
    send(first, "fence", ["zombie"])

    second = transactional_producer(bootstrap, "txn-fence")  # bumps the epoch
    second.begin_transaction()
    send(second, "fence", ["winner"])
    second.commit_transaction(10)

    with pytest.raises(KafkaException) as failure:
        first.produce("fence", value=b"late")
        first.flush(5)
        first.commit_transaction(5)
    error = failure.value.args[0]
    assert error.fatal() or "fenced" in error.str().lower()

    assert read_values(bootstrap, "fence", "read_committed", until=1) == [b"winner"]
    everything = read_values(bootstrap, "fence", "read_uncommitted", until=2)
    assert everything[:2] == [b"zombie", b"winner"]


def test_transaction_timeout_aborts_silent_producer(kafka_broker_factory):
    broker = kafka_broker_factory(config=FAST_TIMEOUTS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "timeout")
    silent = transactional_producer(bootstrap, "txn-silent", **{"transaction.timeout.ms": 1000})
    silent.begin_transaction()
    send(silent, "timeout", ["never-visible-1", "never-visible-2"])
    # The producer now goes silent; the coordinator must abort after ~1 s.
    time.sleep(2.0)
    other = transactional_producer(bootstrap, "txn-other")
    other.begin_transaction()
    send(other, "timeout", ["visible"])
    other.commit_transaction(10)
    assert read_values(bootstrap, "timeout", "read_committed", until=1) == [b"visible"]
    assert read_values(bootstrap, "timeout", "read_committed", seconds=1.0) == [b"visible"]

    with WireClient(bootstrap) as wire:
        response = wire.request(
            InitProducerIdRequest,
            transactional_id="txn-silent",
            transaction_timeout=datetime.timedelta(seconds=10),
            producer_id=-1,
            producer_epoch=-1,
        )
        assert response.error_code == ErrorCode.none
        assert response.producer_epoch >= 2  # bumped by the timeout, then by this init


def test_transactions_survive_broker_kill(kafka_broker_process):
    bootstrap = kafka_broker_process.bootstrap
    create_topic(bootstrap, "durable-tx")
    producer = transactional_producer(bootstrap, "txn-durable")
    producer.begin_transaction()
    send(producer, "durable-tx", ["committed-1", "committed-2"])
    producer.commit_transaction(10)

    # An open transaction survives a coordinator crash and can still be committed.
    producer.begin_transaction()
    send(producer, "durable-tx", ["open-at-crash"])
    kafka_broker_process.restart(kill=True)
    producer.commit_transaction(30)

    # An orphaned transaction is aborted when a new incarnation fences the old one.
    producer.begin_transaction()
    send(producer, "durable-tx", ["orphaned"])
    kafka_broker_process.restart(kill=True)
    replacement = transactional_producer(bootstrap, "txn-durable")
    replacement.begin_transaction()
    send(replacement, "durable-tx", ["committed-3"])
    replacement.commit_transaction(10)
    assert read_values(bootstrap, "durable-tx", "read_committed", until=4) == [
        b"committed-1",
        b"committed-2",
        b"open-at-crash",
        b"committed-3",
    ]
    assert b"orphaned" in read_values(bootstrap, "durable-tx", "read_uncommitted", until=5)


def _drop_last_complete_record(data_dir, transactional_id: str) -> None:
    """Cut __transaction_state back to before the last Complete* record of the id.

    What a power loss leaves when EndTxn was answered (markers durable) but the
    Complete record, whose fsync EndTxn does not wait for, never reached the disk.
    """
    directory = data_dir / "__transaction_state-0"
    (segment,) = sorted(directory.glob("*.log"))[-1:]
    data = segment.read_bytes()
    cut = None
    for header in iter_headers(data):
        if header.is_control:
            continue
        for record in read_key_values(data, header):
            if record.key == transactional_id.encode() and record.value is not None:
                state = json.loads(record.value)["state"]
                if state.startswith("Complete"):
                    cut = header.position
    assert cut is not None, "no Complete record was written"
    with open(segment, "r+b") as handle:
        handle.truncate(cut)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()


def test_commit_whose_complete_record_was_lost_is_completed_again(kafka_broker_process):
    bootstrap = kafka_broker_process.bootstrap
    create_topic(bootstrap, "lost-complete", 2)
    create_topic(bootstrap, "lost-complete-input")
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "lost-complete-group"})
    producer = transactional_producer(bootstrap, "txn-lost-complete")
    producer.begin_transaction()
    for n in range(6):
        producer.produce("lost-complete", value=f"v{n}".encode(), partition=n % 2)
    producer.send_offsets_to_transaction(
        [TopicPartition("lost-complete-input", 0, 42)], group.consumer_group_metadata(), 10
    )
    producer.commit_transaction(10)
    del producer
    # A crash, not a clean stop: a clean stop records everything as durable (recovery
    # point), and a log cut below its recovery point is damage, not a lost tail.
    kafka_broker_process.kill()
    _drop_last_complete_record(kafka_broker_process.data_dir, "txn-lost-complete")
    kafka_broker_process.start()  # recovery finds PrepareCommit and writes the markers again

    expected = [b"v0", b"v2", b"v4", b"v1", b"v3", b"v5"]
    assert sorted(read_values(bootstrap, "lost-complete", "read_committed", 6, partitions=2)) == (
        sorted(expected)
    )
    committed = group.committed([TopicPartition("lost-complete-input", 0)], timeout=10)
    assert committed[0].offset == 42
    # Nothing is left open: the same id commits again, and read_committed sees it.
    producer = transactional_producer(bootstrap, "txn-lost-complete")
    producer.begin_transaction()
    producer.produce("lost-complete", value=b"after", partition=0)
    producer.commit_transaction(10)
    values = read_values(bootstrap, "lost-complete", "read_committed", 7, partitions=2)
    assert sorted(values) == sorted([*expected, b"after"])
    group.close()


def test_protocol_errors_for_bad_transactional_requests(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "bad-tx")
    with WireClient(bootstrap) as wire:
        unknown = wire.request(
            EndTxnRequest,
            transactional_id="nobody",
            producer_id=1,
            producer_epoch=0,
            committed=True,
        )
        assert unknown.error_code == ErrorCode.invalid_producer_id_mapping

        init = wire.request(
            InitProducerIdRequest,
            transactional_id="wire-tx",
            transaction_timeout=datetime.timedelta(seconds=30),
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == ErrorCode.none
        pid, epoch = init.producer_id, init.producer_epoch

        wrong_epoch = wire.request(
            AddPartitionsToTxnRequest,
            v3_and_below_transactional_id="wire-tx",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch + 5,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name="bad-tx", partitions=(0,)),),
        )
        (topic_result,) = wrong_epoch.results_by_topic_v3_and_below
        assert (
            topic_result.results_by_partition[0].partition_error_code == ErrorCode.producer_fenced
        )

        not_added = wire.request(
            TxnOffsetCommitRequest,
            transactional_id="wire-tx",
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                TxnOffsetCommitRequestTopic(
                    name="bad-tx",
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
        assert not_added.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state

        empty_commit = wire.request(
            EndTxnRequest,
            transactional_id="wire-tx",
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        )
        assert empty_commit.error_code == ErrorCode.invalid_txn_state

        bad_timeout = wire.request(
            InitProducerIdRequest,
            transactional_id="wire-tx-2",
            transaction_timeout=datetime.timedelta(hours=2),
            producer_id=-1,
            producer_epoch=-1,
        )
        assert bad_timeout.error_code == ErrorCode.invalid_transaction_timeout

    # The broker still serves normal traffic.
    producer = transactional_producer(bootstrap, "after-bad")
    producer.begin_transaction()
    send(producer, "bad-tx", ["fine"])
    producer.commit_transaction(10)
    assert read_values(bootstrap, "bad-tx", "read_committed", until=1) == [b"fine"]


def test_transactional_produce_outside_transaction_is_rejected(kafka_broker):
    """KIP-890 part 1: a partition not added to the transaction cannot be written."""
    from kio.schema.produce.v9.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    from onceflow.log.batch import ATTR_TRANSACTIONAL, KeyValue, build_batch

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "kip890")
    with WireClient(bootstrap) as wire:
        init = wire.request(
            InitProducerIdRequest,
            transactional_id="kip890-tx",
            transaction_timeout=datetime.timedelta(seconds=30),
            producer_id=-1,
            producer_epoch=-1,
        )
        batch = bytearray(
            build_batch(
                0,
                [KeyValue(None, b"sneaky")],
                int(time.time() * 1000),
                attributes=ATTR_TRANSACTIONAL,
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
            )
        )
        # build_batch leaves base sequence at -1; give it sequence 0 and a fresh CRC.
        import struct

        import crc32c

        struct.pack_into(">i", batch, 53, 0)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
        response = wire.request(
            ProduceRequest,
            transactional_id="kip890-tx",
            acks=-1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                TopicProduceData(
                    name="kip890",
                    partition_data=(PartitionProduceData(index=0, records=bytes(batch)),),
                ),
            ),
        )
        code = response.responses[0].partition_responses[0].error_code
        assert code == ErrorCode.invalid_txn_state
    assert read_values(bootstrap, "kip890", "read_uncommitted", seconds=1.0) == []


def test_kafka_python_transactional_producer(kafka_broker):
    from kafka import KafkaProducer

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "kp-tx")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp-tx", b"kp-committed")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp-tx", b"kp-aborted")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert read_values(bootstrap, "kp-tx", "read_committed", until=1, seconds=3) == [
        b"kp-committed"
    ]


def test_aiokafka_transactional_producer(kafka_broker):
    from aiokafka import AIOKafkaProducer

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "aio-tx")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-tx")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("aio-tx", b"aio-committed")
            await producer.begin_transaction()
            await producer.send_and_wait("aio-tx", b"aio-aborted")
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_values(bootstrap, "aio-tx", "read_committed", until=1, seconds=3) == [
        b"aio-committed"
    ]


def test_transactions_cli_shows_open_and_hanging_state(kafka_broker):
    from click.testing import CliRunner

    from onceflow.cli import main

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "cli-tx")
    producer = transactional_producer(bootstrap, "cli-open-tx")
    producer.begin_transaction()
    send(producer, "cli-tx", ["pending"])
    runner = CliRunner()
    listed = runner.invoke(main, ["transactions", "list", "--bootstrap", bootstrap])
    assert listed.exit_code == 0, listed.output
    assert "cli-open-tx" in listed.output and "Ongoing" in listed.output
    described = runner.invoke(
        main, ["transactions", "describe", "--bootstrap", bootstrap, "cli-open-tx", "missing"]
    )
    assert described.exit_code == 1, described.output  # an unknown transactional id
    assert "cli-tx-0" in described.stdout
    assert described.stderr == "error: transactional id not found: missing\n"
    producers = runner.invoke(
        main, ["transactions", "producers", "--bootstrap", bootstrap, "cli-tx"]
    )
    assert producers.exit_code == 0, producers.output
    assert "open" in producers.output
    producer.commit_transaction(10)
