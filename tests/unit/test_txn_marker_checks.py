"""A partition's checks of COMMIT/ABORT markers (Kafka's ProducerAppendInfo rules), and
the last coordinator epoch surviving a restart that replays markers from the log."""

from __future__ import annotations

import time

import pytest

from onceflow.config import BrokerConfig, TopicConfig
from onceflow.log.batch import (
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    KeyValue,
    build_batch,
    parse_header,
)
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

PRODUCER = 42


def open_log(directory) -> PartitionLog:
    config = TopicConfig(BrokerConfig.from_strings({"log.flush.policy": "os"}), {})
    log = PartitionLog(directory, "t", 0, config)
    log.load()
    return log


def transactional_write(log: PartitionLog, epoch: int) -> int:
    data = build_batch(
        0,
        [KeyValue(None, b"v")],
        int(time.time() * 1000),
        attributes=ATTR_TRANSACTIONAL,
        producer_id=PRODUCER,
        producer_epoch=epoch,
    )
    return log.append_client_batch(data, parse_header(data)).base_offset


def refusal(log: PartitionLog, epoch: int, coordinator_epoch: int) -> ErrorCode:
    end = log.log_end_offset
    with pytest.raises(KafkaError) as refused:
        log.append_marker(PRODUCER, epoch, CONTROL_ABORT, coordinator_epoch)
    assert log.log_end_offset == end  # nothing appended
    return refused.value.code


def test_a_marker_with_an_older_producer_epoch_is_refused(tmp_path):
    log = open_log(tmp_path / "t-0")
    start = transactional_write(log, epoch=2)
    assert refusal(log, epoch=1, coordinator_epoch=0) == ErrorCode.invalid_producer_epoch
    assert log.producers.open_transaction(PRODUCER) == start
    log.append_marker(PRODUCER, 3, CONTROL_ABORT, 0)  # a newer epoch fences the producer
    assert log.producers.open_transaction(PRODUCER) is None
    assert [txn.first_offset for txn in log.aborted] == [start]


def test_a_marker_from_an_older_coordinator_is_refused(tmp_path):
    log = open_log(tmp_path / "t-0")
    transactional_write(log, epoch=0)
    log.append_marker(PRODUCER, 0, CONTROL_COMMIT, coordinator_epoch=5)
    start = transactional_write(log, epoch=0)
    assert refusal(log, epoch=0, coordinator_epoch=4) == ErrorCode.transaction_coordinator_fenced
    assert log.producers.open_transaction(PRODUCER) == start
    assert log.last_stable_offset == start
    log.append_marker(PRODUCER, 0, CONTROL_ABORT, coordinator_epoch=5)
    assert log.last_stable_offset == log.log_end_offset


def test_the_last_coordinator_epoch_is_replayed_from_the_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    transactional_write(log, epoch=0)
    log.append_marker(PRODUCER, 0, CONTROL_COMMIT, coordinator_epoch=5)
    transactional_write(log, epoch=0)
    # SIGKILL: no close(), so no snapshot; recovery replays the marker from the log.
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    recovered = open_log(tmp_path / "t-0")
    assert recovered.producers.entry(PRODUCER).coordinator_epoch == 5
    assert refusal(recovered, 0, coordinator_epoch=4) == ErrorCode.transaction_coordinator_fenced
