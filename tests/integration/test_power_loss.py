"""Power loss at random moments, with real clients: the broker runs with the fsync journal,
is SIGKILLed at a random moment of a mixed workload (idempotent acks=all produce, offset
commits, transactions), every file is cut back to what had been fsynced (with torn,
partly garbled tails, some with a byte of a batch header field flipped), and the broker
restarts on what is left, running its real recovery.

Checked after the crashes: every acknowledged record is where its acknowledgement said,
no record is stored twice, no damaged batch is ever served, committed offsets never go
back past an acknowledged commit, and read_committed sees each acknowledged transaction
exactly once and every other transaction whole or not at all. Segments are small, so
crashes also come between a roll and the fsync that makes it durable.

ONCEFLOW_POWER_LOSS_CYCLES sets the number of crashes (CI: 100; `make stress`: 2,000).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import random
import signal
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from onceflow.log.durability import JOURNAL_ENV
from onceflow.log.power_loss import simulate_power_loss
from onceflow.protocol.client import WireClient
from tests.kit.wire import create_topic, fetch_values

pytestmark = pytest.mark.xdist_group("power-loss")

CYCLES = int(os.environ.get("ONCEFLOW_POWER_LOSS_CYCLES", "100"))
EVENT_PARTITIONS = 3
TXN_PARTITIONS = 2
# A segment rolls every few batches, so that crashes also hit rolls and the fsync after
# them (of the closed segment, the new one's name and the producer-state snapshot).
SMALL_SEGMENTS = {"segment.bytes": "4096"}
QUICK = {"reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "socket.timeout.ms": 5000}


def _serve(data_dir: Path, port: int, journal: Path, log_path: Path) -> None:
    """The broker, in a child forked from a single-threaded fork server."""
    os.environ[JOURNAL_ENV] = str(journal)
    logging.basicConfig(
        filename=log_path, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    from onceflow.broker.broker import Broker
    from onceflow.config import BrokerConfig

    config = BrokerConfig.from_strings({"transaction.max.timeout.ms": "60000"})
    asyncio.run(Broker(data_dir, "127.0.0.1", port, config).serve_forever(asyncio.Event()))


class ForkedBroker:
    """A broker process that starts in a fraction of a second (no interpreter start-up)."""

    def __init__(self, root: Path) -> None:
        self.data_dir = root / "data"
        self.journal = root / "fsync-journal"
        self.log_path = root / "broker.log"
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["onceflow.broker.broker"])
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: multiprocessing.Process | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = (self.data_dir, self.port, self.journal, self.log_path)
        self.process = self.context.Process(target=_serve, args=args, daemon=True)
        self.process.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.is_alive(), f"broker died; see {self.log_path}"
            try:
                with WireClient(self.bootstrap, timeout=1):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"broker did not start; see {self.log_path}")

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join()


class Workload:
    """Clients that keep working across broker crashes and record what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: list[tuple[int, int, bytes]] = []  # partition, offset, value
        self.fatal: list[str] = []
        self.commits_acked: list[int] = []
        self.commits_tried: list[int] = []
        self.txns_acked: list[int] = []
        self.txns_tried: list[int] = []
        self.running = threading.Event()
        self.stopped = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 600_000,
                "error_cb": self._on_error,
                **QUICK,
            }
        )
        self.committer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "power-loss-group", **QUICK}
        )
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._commit, daemon=True),
            threading.Thread(target=self._transact, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _on_error(self, error) -> None:
        if error.fatal():
            self.fatal.append(str(error))

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acked.append((message.partition(), message.offset(), message.value()))

    def _produce(self) -> None:
        number = 0
        while not self.stopped.is_set():
            if not self.running.wait(0.1):
                continue
            for _ in range(20):
                self.producer.produce(
                    "events",
                    key=str(number % 7).encode(),
                    value=f"event-{number}".encode(),
                    on_delivery=self._delivered,
                )
                number += 1
            self.producer.poll(0.005)
            while len(self.producer) > 2000 and not self.stopped.is_set():
                self.producer.poll(0.05)

    def _commit(self) -> None:
        offset = 0
        while not self.stopped.is_set():
            if not self.running.wait(0.1):
                continue
            offset += 1
            self.commits_tried.append(offset)
            try:
                self.committer.commit(
                    offsets=[TopicPartition("events", 0, offset)], asynchronous=False
                )
                self.commits_acked.append(offset)
            except KafkaException:
                time.sleep(0.02)

    def _transact(self) -> None:
        producer = None
        number = 0
        while not self.stopped.is_set():
            if not self.running.wait(0.1):
                continue
            try:
                if producer is None:
                    producer = Producer(
                        {
                            "bootstrap.servers": self.bootstrap,
                            "transactional.id": "power-loss-txn",
                            "transaction.timeout.ms": 30_000,
                            "metadata.recovery.strategy": "none",
                            **QUICK,
                        }
                    )
                    producer.init_transactions(5)
                producer.begin_transaction()
                number += 1
                self.txns_tried.append(number)
                for part in range(3):
                    producer.produce(
                        "txn", value=f"txn-{number}-{part}".encode(), partition=number % 2
                    )
                producer.commit_transaction(5)
                self.txns_acked.append(number)
            except KafkaException:
                producer = None  # a fresh producer fences and aborts what is left open
                time.sleep(0.02)

    def finish(self) -> None:
        self.running.set()
        assert self.producer.flush(120) == 0, "acknowledgements still missing"
        self.stopped.set()
        for thread in self.threads:
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} did not stop: the check would race it"
        self.committer.close()


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, number, 0) for number in range(partitions)])
    values, ended = [], set()
    deadline = time.monotonic() + 60
    while len(ended) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == -191:
                ended.add(message.partition())
            continue
        values.append(message.value())
    consumer.close()
    assert len(ended) == partitions, "read_committed did not reach the end"
    return values


def check(broker: ForkedBroker, workload: Workload) -> None:
    """Check what was acknowledged before the check began. Between crashes the clients'
    threads only stop starting new work: one may still be inside a call begun before the
    crash (init_transactions, commit_transaction, a commit, delivery reports) and get its
    answer while this check reads, after the read of its partition, so an answer taken
    later need not be in what was read. The last check, after ``finish``, sees them all."""
    acked = list(workload.acked)
    commits_acked = list(workload.commits_acked)
    txns_acked = set(workload.txns_acked)
    stored: dict[tuple[int, int], bytes] = {}
    with WireClient(broker.bootstrap) as client:
        for partition in range(EVENT_PARTITIONS):
            for offset, value in fetch_values(client, "events", partition):
                stored[(partition, offset)] = value
    lost = [ack for ack in acked if stored.get(ack[:2]) != ack[2]]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {lost[:3]}"
    twice = [value for value, count in Counter(stored.values()).items() if count > 1]
    assert not twice, f"stored more than once: {twice[:5]}"
    assert not workload.fatal, workload.fatal

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "power-loss-group"})
    (committed,) = consumer.committed([TopicPartition("events", 0)], timeout=30)
    consumer.close()
    if commits_acked:
        assert committed.offset >= commits_acked[-1]
        assert committed.offset <= workload.commits_tried[-1]  # (read after the offset)

    seen = Counter(read_committed(broker.bootstrap, "txn", TXN_PARTITIONS))
    for number in list(workload.txns_tried):
        parts = [seen[f"txn-{number}-{part}".encode()] for part in range(3)]
        if number in txns_acked:
            assert parts == [1, 1, 1], f"acknowledged transaction {number} seen {parts}"
        else:
            assert parts in ([0, 0, 0], [1, 1, 1]), f"transaction {number} seen {parts}"


def test_power_loss_at_random_moments_loses_no_acknowledged_write(tmp_path):
    rng = random.Random(int(os.environ.get("ONCEFLOW_POWER_LOSS_SEED", time.time_ns())))
    broker = ForkedBroker(tmp_path)
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert create_topic(client, "events", EVENT_PARTITIONS, configs=SMALL_SEGMENTS)[0] == 0
        assert create_topic(client, "txn", TXN_PARTITIONS, configs=SMALL_SEGMENTS)[0] == 0
    workload = Workload(broker.bootstrap)
    torn = flips = 0
    for cycle in range(CYCLES):
        workload.running.set()
        time.sleep(rng.uniform(0.01, 0.3))
        broker.kill()
        workload.running.clear()
        loss = simulate_power_loss(broker.data_dir, broker.journal, rng, header_flips=True)
        torn += len(loss.torn_files)
        flips += len(loss.header_flips)
        broker.start()
        if cycle % 50 == 49:
            check(broker, workload)
    workload.finish()
    check(broker, workload)
    log = broker.log_path.read_text()
    assert "Traceback" not in log, "the broker logged an unexpected exception"
    assert "cut the tail" in log, "no torn tail reached recovery: the simulation did nothing"
    assert len(workload.acked) > CYCLES and len(workload.txns_acked) > CYCLES // 4
    assert flips > 0, "no header byte was flipped in a torn tail"
    rolled = max(len(list(path.glob("*.log"))) for path in broker.data_dir.glob("events-*"))
    assert rolled >= 3, f"only {rolled} segments: the crashes missed the rolls"
    print(
        f"{CYCLES} power losses, {torn} torn files, {flips} flipped header bytes: "
        f"{len(workload.acked)} records, "
        f"{len(workload.commits_acked)} commits, {len(workload.txns_acked)} transactions "
        "acknowledged and kept"
    )
