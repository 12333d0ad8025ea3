"""Idempotent producer state: sequence rules, duplicates, epochs, snapshots."""

from __future__ import annotations

import pytest

from onceflow.log.batch import ATTR_TRANSACTIONAL, BatchHeader
from onceflow.log.producer_state import (
    BATCHES_TO_REMEMBER,
    INT32_MAX,
    ProducerStateManager,
    in_sequence,
)
from onceflow.protocol.errors import ErrorCode, KafkaError


def header(
    producer_id: int,
    epoch: int,
    sequence: int,
    records: int = 1,
    base_offset: int = 0,
    transactional: bool = False,
    timestamp: int = 1000,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        length=100,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=ATTR_TRANSACTIONAL if transactional else 0,
        last_offset_delta=records - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        records_count=records,
    )


class Log:
    """Appends headers to a state manager the way PartitionLog does."""

    def __init__(self, state: ProducerStateManager) -> None:
        self.state = state
        self.end = 0

    def append(self, producer_id, epoch, sequence, records=1, **kwargs):
        candidate = header(producer_id, epoch, sequence, records, **kwargs)
        duplicate = self.state.check(candidate)
        if duplicate is not None:
            return ("duplicate", duplicate.first_offset)
        candidate.base_offset = self.end
        self.state.on_append(candidate)
        self.end += records
        return ("appended", candidate.base_offset)


def refusal(log: Log, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as failure:
        log.append(*args, **kwargs)
    return failure.value.code


@pytest.fixture
def log(tmp_path) -> Log:
    return Log(ProducerStateManager(tmp_path))


def test_in_sequence_wraps():
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6) and not in_sequence(4, 4)
    assert in_sequence(INT32_MAX, 0)


def test_unknown_producer_may_start_anywhere(log):
    assert log.append(1, 0, 17, records=3) == ("appended", 0)
    assert log.append(1, 0, 20) == ("appended", 3)


def test_duplicates_answer_original_offsets(log):
    assert log.append(1, 0, 0, records=2) == ("appended", 0)
    assert log.append(1, 0, 2, records=3) == ("appended", 2)
    assert log.append(1, 0, 2, records=3) == ("duplicate", 2)
    assert log.append(1, 0, 0, records=2) == ("duplicate", 0)
    assert log.end == 5


def test_only_the_last_five_batches_are_remembered(log):
    for sequence in range(BATCHES_TO_REMEMBER + 1):
        log.append(1, 0, sequence)
    assert log.append(1, 0, 1) == ("duplicate", 1)
    assert refusal(log, 1, 0, 0) == ErrorCode.out_of_order_sequence_number


def test_gaps_and_overlaps_are_out_of_order(log):
    log.append(1, 0, 0, records=2)
    assert refusal(log, 1, 0, 3) == ErrorCode.out_of_order_sequence_number
    assert refusal(log, 1, 0, 1) == ErrorCode.out_of_order_sequence_number
    assert refusal(log, 1, 0, 0, records=3) == ErrorCode.out_of_order_sequence_number
    assert log.append(1, 0, 2) == ("appended", 2)


def test_sequence_wraps_around(log):
    log.append(1, 0, INT32_MAX - 1, records=2)  # last sequence INT32_MAX
    assert log.append(1, 0, 0) == ("appended", 2)


def test_epochs(log):
    log.append(1, 0, 0)
    log.append(1, 0, 1)
    assert refusal(log, 1, 1, 5) == ErrorCode.out_of_order_sequence_number
    assert log.append(1, 1, 0) == ("appended", 2)
    assert refusal(log, 1, 0, 2) == ErrorCode.invalid_producer_epoch
    # The old epoch's batches are forgotten: not duplicates any more.
    assert refusal(log, 1, 0, 1) == ErrorCode.invalid_producer_epoch


def test_producers_are_independent(log):
    log.append(1, 0, 0)
    assert log.append(2, 0, 0) == ("appended", 1)
    assert log.append(1, 0, 1) == ("appended", 2)


def test_batches_without_producer_id_are_not_tracked(log):
    assert log.append(-1, -1, -1) == ("appended", 0)
    assert log.state.producers == {}


def test_transaction_bounds_the_stable_offset(log):
    log.append(1, 0, 0)
    assert log.state.first_unstable_offset() is None
    log.append(2, 0, 0, records=2, transactional=True)
    log.append(2, 0, 2, transactional=True)
    assert log.state.first_unstable_offset() == 1
    with pytest.raises(KafkaError) as failure:
        log.state.check(header(2, 0, 3))  # non-transactional while a txn is open
    assert failure.value.code == ErrorCode.invalid_txn_state
    marker = header(2, 0, -1, base_offset=4)
    completed = log.state.on_marker(marker, aborted=True, coordinator_epoch=0)
    assert completed is not None and completed.aborted
    assert (completed.first_offset, completed.last_offset) == (1, 4)
    assert log.state.first_unstable_offset() is None


def test_snapshot_round_trip_and_newer_snapshots_are_discarded(tmp_path):
    state = ProducerStateManager(tmp_path)
    log = Log(state)
    log.append(1, 0, 0, records=2)
    log.append(1, 0, 2)
    log.append(2, 3, 0, transactional=True)
    state.write_snapshot(4)
    log.append(1, 0, 3)
    state.write_snapshot(5)

    restored = ProducerStateManager(tmp_path)
    assert restored.load_latest_snapshot(max_offset=4) == 4  # log ends at 4: 5 is too new
    assert not restored.snapshot_path(5).exists()
    again = Log(restored)
    again.end = 4
    assert again.append(1, 0, 2) == ("duplicate", 2)
    assert again.append(1, 0, 0, records=2) == ("duplicate", 0)
    assert again.append(1, 0, 3) == ("appended", 4)
    assert restored.first_unstable_offset() == 3
    assert restored.entry(2).epoch == 3


def test_only_two_snapshots_are_kept_and_garbage_is_skipped(tmp_path):
    state = ProducerStateManager(tmp_path)
    Log(state).append(1, 0, 0)
    for offset in (1, 2, 3):
        state.write_snapshot(offset)
    assert state.snapshot_offsets() == [2, 3]
    state.snapshot_path(3).write_text("{not json")
    restored = ProducerStateManager(tmp_path)
    assert restored.load_latest_snapshot(10) == 2
    assert restored.entry(1) is not None
    empty = ProducerStateManager(tmp_path / "nothing")
    assert empty.load_latest_snapshot(10) == -1


def test_drop_before_forgets_producers_below_log_start(log):
    log.append(1, 0, 0)
    log.append(2, 0, 0)
    log.state.drop_before(1)
    assert log.state.entry(1) is None and log.state.entry(2) is not None
