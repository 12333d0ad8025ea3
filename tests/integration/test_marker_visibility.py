"""A transaction's records and its marker become readable together, as in Kafka.

Kafka keeps a transaction unstable until the high watermark passes its marker, so a
read_committed fetch never returns the transaction's records without the marker behind
them: the last stable offset jumps from the transaction's first offset to past the marker
in one step, with the high watermark. (KafkaJS's "emits start and end batch process when
reading empty control batches" saw the aborted record with high watermark 1, and its
marker only in a later fetch.)
"""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader
from kio.static.primitive import i8, i16, i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import build
from onceflow.protocol.errors import ErrorCode
from tests.kit.batches import decode, record_batch
from tests.kit.wire import create_topic, init_producer_id

READ_COMMITTED = 1


def open_transaction(client: WireClient, topic: str, transactional_id: str) -> tuple[int, int]:
    """A transaction holding one record at offset 0 of ``topic``; (producer id, epoch)."""
    producer_id, epoch = init_producer_id(client, transactional_id)
    added = client.request(
        AddPartitionsToTxnRequest,
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=i64(producer_id),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(i32(0),)),),
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    produced = client.request(
        ProduceRequest,
        transactional_id=transactional_id,
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(
                    PartitionProduceData(
                        index=i32(0),
                        records=record_batch(
                            [b"aborted"], producer_id, epoch, 0, transactional=True
                        ),
                    ),
                ),
            ),
        ),
    )
    answer = produced.responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)
    return producer_id, epoch


def send_fetch(client: WireClient, topic: str, correlation_id: int, wait_ms: int) -> None:
    """A read_committed Fetch from offset 0, sent without waiting for its answer."""
    request = build(
        FetchRequest,
        cluster_id=None,
        replica_id=i32(-1),
        replica_state=None,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(READ_COMMITTED),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=i32(0),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(0),
                        last_fetched_epoch=i32(-1),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    assert client.send(request) == correlation_id


def read_fetch(client: WireClient, correlation_id: int) -> tuple[int, int, list[int]]:
    """(high watermark, last stable offset, offsets of the records) of a Fetch answer."""
    frame = client.read_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == correlation_id
    response, _ = entity_reader(FetchResponse)(frame, 5)
    answer = response.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    batches = answer.records or b""
    offsets = [offset for offset, _ in decode(batches)]
    # decode() skips control batches' records; the marker's offset is its batch's base.
    position = 0
    while position + 61 <= len(batches):
        base, length = struct.unpack_from(">qi", batches, position)
        attributes = struct.unpack_from(">h", batches, position + 21)[0]
        if attributes & 0x20:
            offsets.append(base)
        position += 12 + length
    return answer.high_watermark, answer.last_stable_offset, sorted(set(offsets))


@pytest.mark.parametrize("committed", [False, True], ids=["abort", "commit"])
def test_a_waiting_read_committed_fetch_sees_the_records_and_the_marker_together(
    broker, committed
) -> None:
    topic = f"marker-visibility-{'commit' if committed else 'abort'}"
    with WireClient(broker.bootstrap) as producer, WireClient(broker.bootstrap) as consumer:
        assert create_topic(producer, topic, 1)[0] == 0
        producer_id, epoch = open_transaction(producer, topic, f"{topic}-txn")
        # The open transaction holds the last stable offset at 0: the fetch waits.
        send_fetch(consumer, topic, correlation_id=1, wait_ms=5000)
        ended = producer.request(
            EndTxnRequest,
            transactional_id=f"{topic}-txn",
            producer_id=i64(producer_id),
            producer_epoch=i16(epoch),
            committed=committed,
        )
        assert ended.error_code == ErrorCode.none
        high_watermark, stable, offsets = read_fetch(consumer, correlation_id=1)
        assert (high_watermark, stable, offsets) == (2, 2, [0, 1])


def test_every_read_committed_fetch_during_an_abort_sees_both_or_neither(broker) -> None:
    topic = "marker-visibility-polled"
    with WireClient(broker.bootstrap) as producer, WireClient(broker.bootstrap) as consumer:
        assert create_topic(producer, topic, 1)[0] == 0
        producer_id, epoch = open_transaction(producer, topic, f"{topic}-txn")
        ended = producer.request(
            EndTxnRequest,
            transactional_id=f"{topic}-txn",
            producer_id=i64(producer_id),
            producer_epoch=i16(epoch),
            committed=False,
        )
        assert ended.error_code == ErrorCode.none
        for correlation_id in range(1, 200):
            send_fetch(consumer, topic, correlation_id, wait_ms=0)
            high_watermark, stable, offsets = read_fetch(consumer, correlation_id)
            assert offsets in ([], [0, 1]), (high_watermark, stable, offsets)
            assert (high_watermark, stable) in ((1, 0), (2, 2)), offsets
            if offsets:
                break
        else:
            pytest.fail("the marker never became readable")
