"""Kafka transactions spoken directly on the wire (kio), for tests that need gaps.

confluent-kafka needs FindCoordinator to run transactions; this helper talks to the
onceflow broker's transaction coordinator directly (InitProducerId, AddPartitionsToTxn,
transactional Produce, EndTxn), so read_committed gaps (control records, aborted data) can
be created even when a client library cannot.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid

import crc32c
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

from onceflow.log.batch import ATTR_TRANSACTIONAL, KeyValue, build_batch
from onceflow.protocol.client import WireClient


class WireTransactions:
    def __init__(self, bootstrap: str, transactional_id: str | None = None) -> None:
        self.wire = WireClient(bootstrap)
        self.transactional_id = transactional_id or f"wire-{uuid.uuid4().hex}"
        init = self.wire.request(
            InitProducerIdRequest,
            transactional_id=self.transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == ErrorCode.none, init
        self.producer_id, self.epoch = init.producer_id, init.producer_epoch
        self.sequences: dict[tuple[str, int], int] = {}
        self.added: set[tuple[str, int]] = set()

    def close(self) -> None:
        self.wire.close()

    def send(self, topic: str, partition: int, values: list[bytes]) -> None:
        if (topic, partition) not in self.added:
            response = self.wire.request(
                AddPartitionsToTxnRequest,
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(partition,)),),
            )
            (result,) = response.results_by_topic_v3_and_below
            code = result.results_by_partition[0].partition_error_code
            assert code == ErrorCode.none, code
            self.added.add((topic, partition))
        sequence = self.sequences.get((topic, partition), 0)
        batch = bytearray(
            build_batch(
                0,
                [KeyValue(None, v) for v in values],
                int(time.time() * 1000),
                attributes=ATTR_TRANSACTIONAL,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
            )
        )
        struct.pack_into(">i", batch, 53, sequence)  # base sequence
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
        response = self.wire.request(
            ProduceRequest,
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                TopicProduceData(
                    name=topic,
                    partition_data=(PartitionProduceData(index=partition, records=bytes(batch)),),
                ),
            ),
        )
        code = response.responses[0].partition_responses[0].error_code
        assert code == ErrorCode.none, code
        self.sequences[(topic, partition)] = sequence + len(values)

    def end(self, commit: bool) -> None:
        response = self.wire.request(
            EndTxnRequest,
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )
        assert response.error_code == ErrorCode.none, response
        self.added.clear()
