"""Transactions v2 (KIP-890 part 2) request by request: no client installed here speaks it
(librdkafka and kafka-python stop at EndTxn v3), so the requests are sent as a Kafka 4.0
Java producer sends them, and the outcome is read back with confluent-kafka."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxnV3
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.produce import v9, v12
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.static.primitive import i16, i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import PluginBroker
from tests.kit.batches import record_batch
from tests.kit.wire import init_producer_id

TOPIC = "txn-v2"
GROUP = "txn-v2-group"

# One broker for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("transactions-v2")


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    admin = AdminClient({"bootstrap.servers": kafka_module_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
    return kafka_module_broker


class Producer:
    """The requests of a transactions-v2 producer, one transactional id."""

    def __init__(self, client: WireClient, transactional_id: str) -> None:
        self.client, self.transactional_id = client, transactional_id
        self.producer_id, self.epoch = init_producer_id(client, transactional_id)
        self.sequences = {0: 0, 1: 0}

    def produce(
        self, partition: int, *values: bytes, epoch: int | None = None, version=v12.request
    ) -> ErrorCode:
        epoch = self.epoch if epoch is None else epoch
        records = record_batch(
            list(values), self.producer_id, epoch, self.sequences[partition], transactional=True
        )
        answer = self.client.request(
            version.ProduceRequest,
            transactional_id=self.transactional_id,
            acks=i16(-1),
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                version.TopicProduceData(
                    name=TOPIC,
                    partition_data=(
                        version.PartitionProduceData(index=i32(partition), records=records),
                    ),
                ),
            ),
        )
        code = answer.responses[0].partition_responses[0].error_code
        if code == ErrorCode.none:
            self.sequences[partition] += len(values)
        return code

    def commit_offset(self, partition: int, offset: int) -> ErrorCode:
        answer = self.client.request(
            TxnOffsetCommitRequest,
            transactional_id=self.transactional_id,
            group_id=GROUP,
            producer_id=i64(self.producer_id),
            producer_epoch=i16(self.epoch),
            generation_id=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                TxnOffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=i32(partition),
                            committed_offset=i64(offset),
                            committed_leader_epoch=i32(-1),
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
        return answer.topics[0].partitions[0].error_code

    def end(self, commit: bool, epoch: int | None = None, request=EndTxnRequest):
        answer = self.client.request(
            request,
            transactional_id=self.transactional_id,
            producer_id=i64(self.producer_id),
            producer_epoch=i16(self.epoch if epoch is None else epoch),
            committed=commit,
        )
        if answer.error_code == ErrorCode.none and hasattr(answer, "producer_epoch"):
            if (answer.producer_id, answer.producer_epoch) != (self.producer_id, self.epoch):
                self.sequences = dict.fromkeys(self.sequences, 0)  # a new epoch starts at 0
            self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        return answer


def read_committed(bootstrap: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-v2-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    values = []
    for _ in range(10):
        values += [m.value() for m in consumer.consume(100, 0.3) if m.error() is None]
    consumer.close()
    return sorted(values)


def test_api_versions_finalizes_transaction_version_2(broker) -> None:
    with WireClient(broker.bootstrap) as client:
        answer = client.request(
            ApiVersionsRequest, client_software_name="test", client_software_version="1"
        )
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    supported = {f.name: f.max_version for f in answer.supported_features}
    assert finalized["transaction.version"] == supported["transaction.version"] == 2


def test_transactions_v2_bump_the_epoch_and_add_partitions_implicitly(broker) -> None:
    with WireClient(broker.bootstrap) as client:
        producer = Producer(client, "v2-copier")
        first_epoch = producer.epoch
        # no AddPartitionsToTxn, no AddOffsetsToTxn: Produce v12 and TxnOffsetCommit v5 add them
        assert producer.produce(0, b"a0", b"a1") == ErrorCode.none
        assert producer.produce(1, b"a2") == ErrorCode.none
        assert producer.commit_offset(0, 42) == ErrorCode.none
        answer = producer.end(commit=True)
        assert (answer.error_code, answer.producer_epoch) == (ErrorCode.none, first_epoch + 1)

        # the commit's answer was lost: the retry with the old epoch gets the new one
        retried = producer.end(commit=True, epoch=first_epoch)
        assert (retried.error_code, retried.producer_epoch) == (ErrorCode.none, first_epoch + 1)
        # a zombie still at the old epoch is fenced by the partition (the marker moved it on)
        zombie = producer.produce(0, b"zombie", epoch=first_epoch)
        assert zombie == ErrorCode.invalid_producer_epoch

        assert producer.produce(0, b"b0") == ErrorCode.none
        aborted = producer.end(commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, first_epoch + 2)

    values = read_committed(broker.bootstrap)
    assert [v for v in values if not v.startswith(b"v")] == [b"a0", b"a1", b"a2"]
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "log_level": 3})
    (committed,) = reader.committed([TopicPartition(TOPIC, 0)], timeout=10)
    reader.close()
    assert committed.offset == 42


def test_older_versions_keep_transactions_v1(broker) -> None:
    """Clients that do not use transactions v2 are unaffected: Produce v9 still needs
    AddPartitionsToTxn, and EndTxn v3 keeps the epoch."""
    with WireClient(broker.bootstrap) as client:
        producer = Producer(client, "v1-producer")
        epoch = producer.epoch
        assert producer.produce(0, b"v1", version=v9.request) == ErrorCode.invalid_txn_state
        assert producer.produce(0, b"v2") == ErrorCode.none  # v12 adds the partition
        answer = producer.end(commit=True, request=EndTxnV3)
        assert answer.error_code == ErrorCode.none
        assert producer.epoch == epoch  # v3: no new epoch
        assert producer.produce(1, b"v3") == ErrorCode.none
        assert producer.end(commit=True, request=EndTxnV3).error_code == ErrorCode.none
