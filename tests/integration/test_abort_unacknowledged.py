"""An aborted transaction whose records were written but never acknowledged, then retried.

The failover test lost a transaction this way on Apache Kafka (docs/compatibility.md):
the client's connection to a partition leader dies after the leader wrote a batch and
before its response; the transaction is aborted; librdkafka gives the retried records the
same sequence numbers under the same producer epoch, and the broker answers them as
duplicates of the aborted batch without writing them. Here a proxy in front of onceflow's
broker cuts the connection right after a Produce request instead of killing a leader.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from onceflow.patterns.transactional import KafkaTransaction
from onceflow.testing import unique_name
from tests.kit.clients import consume

PRODUCE = 0
RECORDS = 10


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class ProduceResponseCutter:
    """A TCP proxy to a broker; once armed, it forwards the next Produce request, lets the
    broker write it, and closes the client's connection before the response."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target_port = 0
        self.armed = threading.Event()
        self.cut = threading.Event()
        self.release = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        dropping = threading.Event()

        def responses() -> None:
            try:
                while data := upstream.recv(65536):
                    if not dropping.is_set():
                        client.sendall(data)
            except OSError:
                pass

        threading.Thread(target=responses, daemon=True).start()
        try:
            while True:
                size = _read_exactly(client, 4)
                body = _read_exactly(client, struct.unpack(">i", size)[0])
                (api_key,) = struct.unpack(">h", body[:2])
                if api_key == PRODUCE and self.armed.is_set():
                    self.armed.clear()
                    dropping.set()
                    upstream.sendall(size + body)
                    time.sleep(0.5)  # the broker writes the batch; its response is dropped
                    self.cut.set()
                    self.release.wait(60)
                    break
                upstream.sendall(size + body)
        except (OSError, ConnectionError):
            pass
        client.close()
        upstream.close()

    def close(self) -> None:
        self.listener.close()


def read_committed(bootstrap: str, topic: str) -> list[bytes | None]:
    messages = consume(
        bootstrap, topic, RECORDS, partitions=[0], isolation="read_committed", timeout=10
    )
    return [message.value() for message in messages]


@pytest.mark.parametrize("cut", ["before_abort", "during_abort"])
def test_records_retried_after_an_abort_with_unacknowledged_records_are_written(
    cut, kafka_broker_factory, kafka_topic_factory
):
    proxy = ProduceResponseCutter()
    try:
        broker = kafka_broker_factory(
            {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
        )
        proxy.target_port = broker.port
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = kafka_topic_factory(1, broker=broker)
        txn = KafkaTransaction(
            bootstrap,
            unique_name("txn"),
            # Retry the cut batch only after the abort below has purged it.
            {"retry.backoff.ms": 5000, "retry.backoff.max.ms": 5000},
        )
        values = [str(n).encode() for n in range(RECORDS)]

        txn.begin()
        proxy.armed.set()
        for value in values:
            txn.produce(topic, value, partition=0)
        txn.producer.poll(0)
        assert proxy.cut.wait(10), "no Produce request went through the proxy"
        if cut == "before_abort":
            # The client sees the connection die first and queues the batch to retry,
            # so abort_transaction purges it.
            proxy.release.set()
            time.sleep(1)
        else:
            # The batch is still in flight when abort_transaction purges the queues; the
            # connection dies during its flush and puts the batch back into a queue that
            # the aborting producer no longer sends from.
            threading.Timer(1, proxy.release.set).start()
        txn.abort()

        txn.begin()
        for value in values:
            txn.produce(topic, value, partition=0)
        txn.commit()
        txn.close()

        assert read_committed(bootstrap, topic) == values
    finally:
        proxy.release.set()
        proxy.close()
