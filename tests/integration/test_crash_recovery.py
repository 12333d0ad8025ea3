"""SIGKILL the broker under acks=all load, and tear the tail of a segment by hand.

Every acknowledged record must survive, in order, at the offset it was acknowledged
with; offsets continue after recovery; a torn last batch (bad length or CRC) is dropped
and nothing before it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.log.batch import HEADER_SIZE, iter_headers
from onceflow.testing import BrokerProcess
from tests.kit.clients import consume, create_topic
from tests.kit.wait import wait_until

TIMEOUT = 30
PARTITIONS = 3


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """The ``expected`` records, and any beyond them that show up within 0.3 s."""
    return consume(bootstrap, topic, expected, partitions=range(partitions), idle=0.3, strict=True)


class ProducerLoop(threading.Thread):
    """An idempotent acks=all producer sending numbered keyed records until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 1,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "retry.backoff.ms": 20,
            }
        )
        self.stop = threading.Event()
        self.sent = 0
        self.acked: dict[int, tuple[int, int]] = {}  # number -> (partition, offset)
        self.failed: list[tuple[int, str]] = []
        self.lock = threading.Lock()

    def _report(self, error, message) -> None:
        number = int(message.value())
        with self.lock:
            if error is None:
                self.acked[number] = (message.partition(), message.offset())
            else:
                self.failed.append((number, str(error)))

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    key=f"key-{self.sent % 11}".encode(),
                    value=str(self.sent).encode(),
                    on_delivery=self._report,
                )
                self.sent += 1
            except BufferError:
                self.producer.poll(0.05)
                continue
            if self.sent % 50 == 0:
                self.producer.poll(0)
                time.sleep(0.002)  # a steady stream, not one giant burst
        self.remaining = self.producer.flush(TIMEOUT)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def test_sigkill_during_acks_all_stream_loses_no_acknowledged_record(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "stream", PARTITIONS)
        loop = ProducerLoop(broker.bootstrap, "stream")
        loop.start()
        acked_before_kill = []
        for _kill in range(3):
            target = loop.acked_count() + 400
            wait_until(
                lambda target=target: loop.acked_count() >= target, TIMEOUT, 0.01, what="acks"
            )
            acked_before_kill.append(loop.acked_count())
            broker.kill()  # in the middle of the stream: requests are in flight
            time.sleep(0.1)
            broker.start()
        target = loop.acked_count() + 200
        wait_until(
            lambda: loop.acked_count() >= target, TIMEOUT, 0.01, what="acks after the last restart"
        )
        loop.stop.set()
        loop.join(TIMEOUT + 5)
        assert not loop.is_alive()
        assert loop.remaining == 0
        assert loop.failed == [], loop.failed[:5]
        assert len(loop.acked) == loop.sent

        messages = read_all(broker.bootstrap, "stream", PARTITIONS, loop.sent)
        stored = {(m.partition(), m.offset()): int(m.value()) for m in messages}
        assert len(stored) == len(messages), "an offset was returned twice"
        # Every acknowledged record is where its acknowledgement said it was...
        for number, place in loop.acked.items():
            assert stored.get(place) == number, f"record {number} acked at {place} is missing"
        # ...nothing else is stored (no duplicates from retries across the kills)...
        assert sorted(stored.values()) == list(range(loop.sent))
        # ...and each partition is dense from 0, in send order per key.
        for partition in range(PARTITIONS):
            offsets = sorted(o for p, o in stored if p == partition)
            assert offsets == list(range(len(offsets)))
            values = [stored[(partition, o)] for o in offsets]
            by_key: dict[int, list[int]] = {}
            for value in values:
                by_key.setdefault(value % 11, []).append(value)
            for sequence in by_key.values():
                assert sequence == sorted(sequence)
        assert all(count > 0 for count in acked_before_kill)
    finally:
        broker.stop()


def produce_batches(bootstrap: str, topic: str, count: int, start: int = 0) -> list[int]:
    """One record per batch; returns the acknowledged offsets."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    offsets = []
    for number in range(start, start + count):
        producer.produce(
            topic,
            value=f"value-{number}".encode(),
            on_delivery=lambda e, m: offsets.append(m.offset() if e is None else -1),
        )
        producer.flush(TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    return offsets


def active_segment(data_dir: Path, topic: str) -> Path:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))[-1]


def values_of(bootstrap: str, topic: str, expected: int) -> list[str]:
    return [m.value().decode() for m in read_all(bootstrap, topic, 1, expected)]


@pytest.mark.parametrize(
    "damage",
    ["partial-header", "length-past-end", "flipped-byte-in-last-batch", "half-last-batch"],
)
def test_torn_tail_of_active_segment_drops_only_the_torn_batch(tmp_path, damage):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "torn", 1)
        assert produce_batches(broker.bootstrap, "torn", 5) == [0, 1, 2, 3, 4]
        broker.kill()
        segment = active_segment(broker.data_dir, "torn")
        data = segment.read_bytes()
        headers = list(iter_headers(data))
        assert len(headers) == 5
        last = headers[-1]
        if damage == "partial-header":  # a 6th batch cut inside its header
            with open(segment, "ab") as handle:
                handle.write(data[last.position : last.position + HEADER_SIZE // 2])
            survivors = 5
        elif damage == "length-past-end":  # a 6th batch whose length runs past the file
            with open(segment, "ab") as handle:
                handle.write(data[last.position : last.position + last.size - 3])
            survivors = 5
        elif damage == "flipped-byte-in-last-batch":  # CRC no longer matches
            garbled = bytearray(data)
            garbled[last.position + last.size - 2] ^= 0xFF
            segment.write_bytes(bytes(garbled))
            survivors = 4
        else:  # the last batch itself was cut short
            os.truncate(segment, last.position + last.size // 2)
            survivors = 4

        broker.start()
        expected = [f"value-{n}" for n in range(survivors)]
        assert values_of(broker.bootstrap, "torn", survivors) == expected
        assert segment.stat().st_size == last.position + (last.size if survivors == 5 else 0)
        # Offsets continue right after the last intact batch, from a new producer.
        assert produce_batches(broker.bootstrap, "torn", 2, start=100) == [
            survivors,
            survivors + 1,
        ]
        assert values_of(broker.bootstrap, "torn", survivors + 2) == [
            *expected,
            "value-100",
            "value-101",
        ]
        # And it is all still there after one more crash.
        broker.kill()
        broker.start()
        assert len(values_of(broker.bootstrap, "torn", survivors + 2)) == survivors + 2
    finally:
        broker.stop()


def test_torn_tail_after_segment_roll_keeps_older_segments(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "rolled", 1, **{"segment.bytes": "300"})
        produce_batches(broker.bootstrap, "rolled", 8)
        broker.kill()
        segments = sorted((broker.data_dir / "rolled-0").glob("*.log"))
        assert len(segments) >= 2
        with open(segments[-1], "ab") as handle:
            handle.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\xff\xff")  # torn header
        # Remove the older segments' indexes too: they must be rebuilt, not trusted.
        for index in (broker.data_dir / "rolled-0").glob("*.index"):
            index.unlink()
        broker.start()
        assert values_of(broker.bootstrap, "rolled", 8) == [f"value-{n}" for n in range(8)]
        assert produce_batches(broker.bootstrap, "rolled", 1, start=8) == [8]
    finally:
        broker.stop()
