"""What the versions Kafka 3.9 added mean, answered as Kafka 3.9 answers them: ListOffsets
v8-9's special timestamps (no tiered storage), ApiVersions v4's features, and the batched,
verify-only AddPartitionsToTxn v4-5 a broker sends."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest as AddPartitionsV3,
)
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnTopic as TopicV3,
)
from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.static.primitive import i16, i32, i64

from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import request_class
from onceflow.protocol.errors import ErrorCode
from onceflow.testing import PluginBroker
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, produce

TOPIC = "newer-versions"
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    with WireClient(kafka_module_broker.bootstrap) as client:
        assert create_topic(client, TOPIC, 2)[0] == 0
        for value in (b"a", b"b", b"c"):
            assert produce(client, TOPIC, 0, record_batch([value]))[0] == 0
        deleted = client.request(
            DeleteRecordsRequest,
            topics=(
                DeleteRecordsTopic(
                    name=TOPIC,
                    partitions=(DeleteRecordsPartition(partition_index=i32(0), offset=i64(1)),),
                ),
            ),
            timeout=datetime.timedelta(seconds=5),
        )
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    return kafka_module_broker


def list_offset(broker: PluginBroker, version: int, timestamp: int) -> tuple[int, int, int]:
    """(error code, offset, leader epoch) of partition 0 at ListOffsets ``version``."""
    cls = request_class(2, version)
    module = __import__(cls.__module__, fromlist=["ListOffsetsTopic", "ListOffsetsPartition"])
    with WireClient(broker.bootstrap) as client:
        response = client.request(
            cls,
            replica_id=i32(-1),
            isolation_level=0,
            topics=(
                module.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=(
                        module.ListOffsetsPartition(
                            partition_index=i32(0), timestamp=i64(timestamp)
                        ),
                    ),
                ),
            ),
        )
    (answer,) = response.topics[0].partitions
    return int(answer.error_code), answer.offset, answer.leader_epoch


@pytest.mark.parametrize(
    ("version", "timestamp", "expected"),
    [
        (9, LATEST, (0, 3, 0)),
        (9, EARLIEST, (0, 1, 0)),
        (9, EARLIEST_LOCAL, (0, 1, 0)),  # everything is local: the log start offset
        (9, LATEST_TIERED, (0, -1, -1)),  # nothing is tiered
        (8, EARLIEST_LOCAL, (0, 1, 0)),
        (8, LATEST_TIERED, (ErrorCode.unsupported_version, -1, 0)),  # v9+
        (7, EARLIEST_LOCAL, (ErrorCode.unsupported_version, -1, 0)),  # v8+
        (6, MAX_TIMESTAMP, (ErrorCode.unsupported_version, -1, 0)),  # v7+
        (9, -6, (ErrorCode.unsupported_version, -1, 0)),  # no such special timestamp
    ],
)
def test_list_offsets_special_timestamps(broker, version, timestamp, expected) -> None:
    code, offset, epoch = list_offset(broker, version, timestamp)
    assert (code, offset) == expected[:2]
    if code == ErrorCode.none:
        assert epoch == expected[2]


def test_api_versions_lists_features_with_min_version_0_only_from_v4(broker) -> None:
    with WireClient(broker.bootstrap) as client:
        old = client.request(ApiVersionsV3, client_software_name="t", client_software_version="1")
        new = client.request(ApiVersionsV4, client_software_name="t", client_software_version="1")
    assert old.supported_features == ()
    assert {f.name: (f.min_version, f.max_version) for f in new.supported_features} == {
        "group.version": (0, 1),
        "transaction.version": (0, 2),
    }
    finalized = {f.name: f.max_version_level for f in old.finalized_features}
    assert finalized == {f.name: f.max_version_level for f in new.finalized_features}


def test_batched_add_partitions_adds_and_verifies(broker) -> None:
    with WireClient(broker.bootstrap) as client:
        started = client.request(
            InitProducerIdRequest,
            transactional_id="newer-versions-txn",
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=i64(-1),
            producer_epoch=i16(-1),
        )
        producer_id, epoch = started.producer_id, started.producer_epoch
        added = client.request(
            AddPartitionsV3,
            v3_and_below_transactional_id="newer-versions-txn",
            v3_and_below_producer_id=i64(producer_id),
            v3_and_below_producer_epoch=i16(epoch),
            v3_and_below_topics=(TopicV3(name=TOPIC, partitions=(i32(0),)),),
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )

        def batched(verify_only: bool, partitions: tuple[int, ...], epoch: int = epoch) -> dict:
            response = client.request(
                AddPartitionsToTxnRequest,
                transactions=(
                    AddPartitionsToTxnTransaction(
                        transactional_id="newer-versions-txn",
                        producer_id=i64(producer_id),
                        producer_epoch=i16(epoch),
                        verify_only=verify_only,
                        topics=(
                            AddPartitionsToTxnTopic(
                                name=TOPIC, partitions=tuple(i32(p) for p in partitions)
                            ),
                        ),
                    ),
                ),
            )
            assert response.error_code == ErrorCode.none
            (result,) = response.results_by_transaction
            assert result.transactional_id == "newer-versions-txn"
            return {
                p.partition_index: p.partition_error_code
                for topic in result.topic_results
                for p in topic.results_by_partition
            }

        assert batched(True, (0, 1)) == {
            0: ErrorCode.none,
            1: ErrorCode.transaction_abortable,
        }
        assert batched(True, (0,), epoch=epoch + 1) == {0: ErrorCode.producer_fenced}
        assert batched(False, (1,)) == {1: ErrorCode.none}
        assert batched(True, (0, 1)) == {0: ErrorCode.none, 1: ErrorCode.none}
