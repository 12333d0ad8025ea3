"""The Spark connectors' Kafka clients ride through a partition without a leader, and fail
with one line after ``unavailableTimeoutMs`` (issue 33, item 8).

On the session's 3-node cluster, a topic with replication factor 1 loses the only replica
of a partition when its node is SIGKILLed: after the node is fenced the partition has no
leader at all until the node is back. librdkafka then answers the source's ListOffsets
with ``_NOENT`` ("Failed to query partition leaders: No leaders found"), which failed the
orders demo's queries at ``latestOffset``. Here the driver's offset reader, an executor's
range reader and a Kafka-sink task work against such a partition while its node is down,
without Spark (the demo runs them in Spark: tests/apache_kafka/test_orders_demo.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.spark.kafka_sink.markers import Marker, TopicMarkers
from onceflow.spark.kafka_sink.options import parse_kafka_options
from onceflow.spark.kafka_sink.task_transaction import write_task
from onceflow.spark.kafka_source.offset_reader import OffsetReader
from onceflow.spark.kafka_source.offsets import OffsetRange
from onceflow.spark.kafka_source.options import parse_options
from onceflow.spark.kafka_source.reader import ReadSettings, read_range
from onceflow.spark.leader_change import KafkaUnavailableError
from tests.kit.wait import wait_until

pytest.importorskip("pyspark")

RECORDS = 30  # per input partition
OUTPUT = 10  # records the sink task writes


@pytest.fixture
def cluster(apache_kafka_cluster):
    apache_kafka_cluster.heal()
    yield apache_kafka_cluster
    apache_kafka_cluster.heal()


class Outcome(threading.Thread):
    """``call()`` on its own thread: its result or its exception."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as error:  # reported by the test
            self.error = error

    def get(self) -> Any:
        self.join(300)
        assert not self.is_alive(), "still waiting after the partition came back"
        if self.error is not None:
            raise self.error
        return self.result


def one_replica_topics(cluster, topic_factory) -> tuple[str, str, int]:
    """An input topic with RECORDS records in each of 3 partitions and an output topic,
    both with one replica per partition; returns them and the node leading input
    partition 0."""
    source = topic_factory(partitions=3, replication_factor=1)
    output = topic_factory(partitions=3, replication_factor=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(3):
        for n in range(RECORDS):
            producer.produce(source, value=f"{partition}-{n}".encode(), partition=partition)
    assert producer.flush(30) == 0
    return source, output, cluster.leader_of(source, 0)


def offset_reader(bootstrap: str, topic: str, **options: str) -> OffsetReader:
    return OffsetReader(
        parse_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}, batch=False
        )
    )


def read(bootstrap: str, topic: str, **settings: Any) -> list[bytes]:
    batches = read_range(
        OffsetRange(topic, 0, 0, RECORDS),
        ReadSettings({"bootstrap.servers": bootstrap}, **settings),
    )
    return [row["value"] for batch in batches for row in batch.to_pylist()]


def sink_task(bootstrap: str, output: str, partition: int) -> int:
    """A batch write task of the onceflow-kafka sink: OUTPUT rows into ``partition``."""
    options = parse_kafka_options(
        # timeoutMs bounds each call; the outage is ridden through by unavailableTimeoutMs
        {"kafka.bootstrap.servers": bootstrap, "topic": output, "timeoutMs": "3000"},
        streaming=False,
    )
    rows = pa.RecordBatch.from_pydict(
        {
            "value": [f"out-{n}".encode() for n in range(OUTPUT)],
            "partition": pa.array([partition] * OUTPUT, pa.int32()),
        }
    )
    return write_task(options, iter([rows])).records


def committed(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition"
            if message.error():
                break  # _PARTITION_EOF
            values.append(message.value())
    finally:
        consumer.close()
    return values


def wait_leaderless(cluster, topic: str, partition: int) -> None:
    """Until the cluster has fenced the dead node: the partition has no leader."""
    while cluster.leader_of(topic, partition) != -1:
        threading.Event().wait(0.2)


class Warnings(logging.Handler):
    """The warnings onceflow's Spark connectors log, for waiting until each one says it
    waits."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger("onceflow.spark")

    def __enter__(self) -> Warnings:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.logger.removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def wait_for(self, *starts: str, timeout_s: float = 120) -> None:
        wait_until(
            lambda: all(any(m.startswith(s) for m in self.messages) for s in starts),
            timeout_s,
            what=f"warnings starting {starts} (logged: {self.messages})",
        )


def test_connectors_ride_through_a_partition_without_leader(cluster, apache_kafka_topic_factory):
    source, output, victim = one_replica_topics(cluster, apache_kafka_topic_factory)
    out_partition = next(p for p in range(3) if cluster.leader_of(output, p) == victim)
    bootstrap = cluster.bootstrap
    cluster.kill(victim)
    wait_leaderless(cluster, source, 0)
    with Warnings() as warnings:
        reader = offset_reader(bootstrap, source)
        latest = Outcome(lambda: reader.latest(reader.partitions()))
        # a poll timeout shorter than the outage: the task waits for the leader regardless
        records = Outcome(lambda: read(bootstrap, source, poll_timeout_ms=2_000))
        written = Outcome(lambda: sink_task(bootstrap, output, out_partition))
        # the node comes back once all three wait on a partition without leader; the
        # clients then reconnect to it after their backoff (up to 10 s by default)
        warnings.wait_for(
            f"offsets of {source}-0: ",
            f"{source}-0 has no leader",
            "commit_transaction of onceflow-",
        )
        cluster.start_node(victim)

    assert latest.get() == {(source, p): RECORDS for p in range(3)}
    assert records.get() == [f"0-{n}".encode() for n in range(RECORDS)]
    assert written.get() == OUTPUT
    assert committed(bootstrap, output, out_partition) == [
        f"out-{n}".encode() for n in range(OUTPUT)
    ]


def test_connectors_fail_with_one_line_after_unavailable_timeout(
    cluster, apache_kafka_topic_factory
):
    source, _output, victim = one_replica_topics(cluster, apache_kafka_topic_factory)
    bootstrap = cluster.bootstrap
    cluster.kill(victim)
    wait_leaderless(cluster, source, 0)

    reader = offset_reader(bootstrap, source, unavailableTimeoutMs="2000")
    with pytest.raises(KafkaUnavailableError) as raised:
        reader.latest(reader.partitions())
    text = str(raised.value)
    assert "\n" not in text, text
    assert text.startswith(f"offsets of {source}-0: still unavailable after "), text
    assert "'unavailableTimeoutMs' (2000 ms)" in text, text

    with pytest.raises(KafkaUnavailableError) as raised:
        read(bootstrap, source, poll_timeout_ms=1_000, unavailable_timeout_ms=2_000)
    text = str(raised.value)
    assert "\n" not in text, text
    assert text.startswith(f"reading {source}-0 offsets [0, {RECORDS}): still unavailable"), text


def test_a_marker_reader_made_as_its_leader_dies_finds_the_new_leader(cluster):
    """A client made right after a partition's leader was SIGKILLed, before the cluster
    fenced the node, learns the dead leader from its first metadata. The Kafka sink's
    marker reader then asked that node for the partition's end until
    ``unavailableTimeoutMs`` ran out (librdkafka kept the leader it had cached: the orders
    demo's confirmations query failed so in a fresh-clone run); it must find the new
    leader once the cluster has elected one."""
    sink_id = f"outage-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": cluster.bootstrap}
    markers = TopicMarkers(config, sink_id, timeout=10, unavailable_timeout=60)
    markers.ensure(0)  # replicated (3 copies): a new leader is elected at once
    cluster.wait_for_topic(markers.topic)
    partition = 0
    victim = cluster.leader_of(markers.topic, partition)
    cluster.kill(victim)
    reader = TopicMarkers(config, sink_id, timeout=10, unavailable_timeout=60)
    assert reader.last(partition) is None  # no marker written: the end was found
    assert cluster.leader_of(markers.topic, partition) not in (victim, -1)


def test_a_marker_topic_made_while_a_node_was_down_takes_markers_after_another_dies(cluster):
    """Made while one of the 3 nodes was down, the marker topic gets 2 copies. With the
    cluster's min.insync.replicas=2 the next node to die then stopped every sink task that
    wrote a marker to a partition it held, until that node came back (the orders demo's
    confirmations query failed so after 120 s in a fresh-clone run). It takes markers with
    one copy left."""
    config = {"bootstrap.servers": cluster.bootstrap}
    first = min(cluster.nodes)
    cluster.kill(first)
    assert wait_until(lambda: len(cluster.metadata().brokers) == 2, 60)
    markers = TopicMarkers(config, f"degraded-{uuid.uuid4().hex[:8]}", timeout=10,
                           unavailable_timeout=60)  # fmt: skip
    markers.ensure(0)
    cluster.wait_for_topic(markers.topic)
    cluster.start_node(first)
    victim = cluster.leader_of(markers.topic, 0)
    cluster.kill(victim)
    writer = {**config, "transactional.id": f"{markers.topic}-writer",
              "transaction.timeout.ms": 60_000}  # fmt: skip
    producer = Producer(writer)
    producer.init_transactions(60)
    producer.begin_transaction()
    markers.write(producer, 0, Marker(7, "query"))
    producer.commit_transaction(45)  # raised _TIMED_OUT with min.insync.replicas=2
    # As the sink's next task does: its init_transactions waits until the coordinator has
    # written the commit's control records, before which a read_committed read stops short
    # of the marker (the commit returns before they are written).
    Producer(writer).init_transactions(60)
    assert markers.last(0) == Marker(7, "query")
