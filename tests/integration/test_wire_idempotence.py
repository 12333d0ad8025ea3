"""The idempotent producer checked straight over the wire with hand-built batches.

InitProducerId, then Produce requests carrying kio-written batches with chosen producer
id, epoch and sequence: a replayed batch gets its original offset and appends nothing,
gaps get OUT_OF_ORDER_SEQUENCE_NUMBER, older epochs INVALID_PRODUCER_EPOCH, and all of it
still holds after a SIGKILL restart (state rebuilt from snapshots and the log).
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from onceflow.protocol.client import WireClient
from onceflow.testing import BrokerProcess
from tests.kit.batches import record_batch
from tests.kit.wire import create_topic, fetch_values, init_producer_id, list_offset, produce

NONE = int(ErrorCode.none)
OUT_OF_ORDER = int(ErrorCode.out_of_order_sequence_number)
INVALID_EPOCH = int(ErrorCode.invalid_producer_epoch)


@pytest.fixture
def broker(kafka_broker):
    return kafka_broker


def latest(client: WireClient, topic: str) -> int:
    code, offset, _ = list_offset(client, topic, 0, -1)
    assert code == NONE
    return offset


def test_replayed_batch_gets_original_offset_and_appends_nothing(broker):
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "idem")[0] == NONE
        producer_id, epoch = init_producer_id(client)
        assert producer_id >= 0 and epoch == 0
        first = record_batch([b"a", b"b", b"c"], producer_id, epoch, base_sequence=0)
        assert produce(client, "idem", 0, first) == (NONE, 0)
        second = record_batch([b"d"], producer_id, epoch, base_sequence=3)
        assert produce(client, "idem", 0, second) == (NONE, 3)
        assert latest(client, "idem") == 4

        # The very same bytes again (a retry after a lost response): original offsets.
        assert produce(client, "idem", 0, second) == (NONE, 3)
        assert produce(client, "idem", 0, first) == (NONE, 0)
        assert latest(client, "idem") == 4
        assert fetch_values(client, "idem") == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]

        # The sequence continues normally afterwards.
        assert produce(client, "idem", 0, record_batch([b"e"], producer_id, epoch, 4)) == (
            NONE,
            4,
        )
        # Another producer's batches are independent.
        other_id, other_epoch = init_producer_id(client)
        assert other_id != producer_id
        assert produce(client, "idem", 0, record_batch([b"x"], other_id, other_epoch, 0)) == (
            NONE,
            5,
        )


def test_sequence_gaps_and_stale_epochs_are_refused(broker):
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "seq")
        producer_id, epoch = init_producer_id(client)
        assert produce(client, "seq", 0, record_batch([b"0", b"1"], producer_id, epoch, 0))[0] == (
            NONE
        )
        # Gap: the next sequence is 2.
        gap = record_batch([b"5"], producer_id, epoch, base_sequence=5)
        assert produce(client, "seq", 0, gap)[0] == OUT_OF_ORDER
        # Overlapping the last batch without being it.
        overlap = record_batch([b"1"], producer_id, epoch, base_sequence=1)
        assert produce(client, "seq", 0, overlap)[0] == OUT_OF_ORDER
        assert latest(client, "seq") == 2

        # Only the last five batches are remembered: an older retry is out of order.
        for sequence in range(2, 8):
            batch = record_batch([str(sequence).encode()], producer_id, epoch, sequence)
            assert produce(client, "seq", 0, batch) == (NONE, sequence)
        old = record_batch([b"0", b"1"], producer_id, epoch, 0)
        assert produce(client, "seq", 0, old)[0] == OUT_OF_ORDER
        remembered = record_batch([b"3"], producer_id, epoch, 3)
        assert produce(client, "seq", 0, remembered) == (NONE, 3)

        # A new epoch must start at sequence 0; then the old epoch is fenced.
        bad_start = record_batch([b"n"], producer_id, epoch + 1, base_sequence=4)
        assert produce(client, "seq", 0, bad_start)[0] == OUT_OF_ORDER
        fresh = record_batch([b"new-epoch"], producer_id, epoch + 1, base_sequence=0)
        assert produce(client, "seq", 0, fresh) == (NONE, 8)
        stale = record_batch([b"stale"], producer_id, epoch, base_sequence=8)
        assert produce(client, "seq", 0, stale)[0] == INVALID_EPOCH
        assert latest(client, "seq") == 9
        values = [value for _, value in fetch_values(client, "seq")]
        assert values == [b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"new-epoch"]


@pytest.mark.parametrize("segment_bytes", [None, "200"])
def test_idempotent_state_survives_sigkill(tmp_path, segment_bytes):
    """Replay from the log alone, and from a roll-time snapshot plus the log after it."""
    config = {"segment.bytes": segment_bytes} if segment_bytes else {}
    broker = BrokerProcess(tmp_path / "data", config=config).start()
    try:
        with WireClient(broker.bootstrap) as client:
            create_topic(client, "crash")
            producer_id, epoch = init_producer_id(client)
            batches = [
                record_batch([f"v{n}".encode()], producer_id, epoch, base_sequence=n)
                for n in range(6)
            ]
            for number, batch in enumerate(batches):
                assert produce(client, "crash", 0, batch) == (NONE, number)
            # A second producer moves to epoch 1: epoch 0 must stay fenced after the crash.
            bumped_id, _ = init_producer_id(client)
            assert produce(client, "crash", 0, record_batch([b"b0"], bumped_id, 0, 0))[0] == NONE
            assert produce(client, "crash", 0, record_batch([b"b1"], bumped_id, 1, 0))[0] == NONE
        broker.kill()
        if segment_bytes:
            assert len(list((broker.data_dir / "crash-0").glob("*.snapshot"))) >= 1
        else:
            assert not list((broker.data_dir / "crash-0").glob("*.snapshot"))
        broker.start()
        with WireClient(broker.bootstrap) as client:
            # The last batch and an older remembered one are still known duplicates.
            assert produce(client, "crash", 0, batches[5]) == (NONE, 5)
            assert produce(client, "crash", 0, batches[2]) == (NONE, 2)
            assert latest(client, "crash") == 8
            gap = record_batch([b"gap"], producer_id, epoch, base_sequence=9)
            assert produce(client, "crash", 0, gap)[0] == OUT_OF_ORDER
            stale = record_batch([b"stale"], bumped_id, 0, base_sequence=1)
            assert produce(client, "crash", 0, stale)[0] == INVALID_EPOCH
            following = record_batch([b"v6"], producer_id, epoch, base_sequence=6)
            assert produce(client, "crash", 0, following) == (NONE, 8)
            # New producer ids are never reused after a crash.
            new_id, _ = init_producer_id(client)
            assert new_id != producer_id
        # A clean stop writes a snapshot; duplicates still detected after it.
        broker.stop()
        broker.start()
        with WireClient(broker.bootstrap) as client:
            following = record_batch([b"v6"], producer_id, epoch, base_sequence=6)
            assert produce(client, "crash", 0, following) == (NONE, 8)
            assert produce(client, "crash", 0, batches[5]) == (NONE, 5)
            stale = record_batch([b"stale"], bumped_id, 0, base_sequence=1)
            assert produce(client, "crash", 0, stale)[0] == INVALID_EPOCH
            assert [v for _, v in fetch_values(client, "crash")] == [
                *(f"v{n}".encode() for n in range(6)),
                b"b0",
                b"b1",
                b"v6",
            ]
    finally:
        broker.stop()
