"""Idempotency markers of the Kafka sink: the last batch each task partition committed.

A marker ``{"batch_id": N, "query_id": ...}`` is written *inside* the Kafka transaction
that carries a task's output, so it is committed (or aborted) together with that output.
Markers live in a compacted topic per sink, ``__onceflow_sink_markers.<sinkId>``, where
partition ``p`` holds only the markers of task partition ``p``: that partition is written
by exactly one transactional id (``onceflow-<sinkId>-<p>``), so after that id's
``init_transactions`` (which completes or aborts its previous transaction) the partition
has no open transaction and a ``read_committed`` read of its tail is never blocked by
another task's transaction.

This is the fallback design while consumer-group offset APIs are missing from the broker;
the group design (``send_offsets_to_transaction`` for a group per task partition, read
back with ``committed()``) can replace ``TopicMarkers`` behind the same two methods.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from onceflow.spark.leader_change import (
    ATTEMPT_TIMEOUT_S,
    DEFAULT_UNAVAILABLE_TIMEOUT_MS,
    NO_LEADER_ERRORS,
    is_leader_change,
    is_unavailable,
    watermarks,
    while_leader_moves,
)

MARKER_TOPIC_PREFIX = "__onceflow_sink_markers."
MIN_PARTITIONS = 8
MARKER_REPLICAS = 3  # copies of the marker topic, as Kafka's internal topics (fewer brokers: all)


def marker_topic_config(replicas: int) -> dict[str, str]:
    """The marker topic's configs for ``replicas`` copies.

    With fewer copies than ``MARKER_REPLICAS`` (a smaller cluster, or one created while a
    broker was down: only the brokers up count) the topic takes writes while one copy is
    left (``min.insync.replicas`` 1). With the cluster's default of 2 (a 3-node cluster's
    usual setting) a marker topic made with 2 copies while the third node was down stopped
    every sink task that wrote to a partition of it at the next node's death, until that
    node came back: the sink's ``unavailableTimeoutMs`` then failed the query.
    """
    config = {"cleanup.policy": "compact"}
    if replicas < MARKER_REPLICAS:
        config["min.insync.replicas"] = "1"
    return config


class MarkerError(RuntimeError):
    """The marker topic cannot be created or read."""


@dataclass(frozen=True)
class Marker:
    batch_id: int
    query_id: str | None

    def encode(self) -> bytes:
        return json.dumps({"batch_id": self.batch_id, "query_id": self.query_id}).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> Marker | None:
        try:
            data = json.loads(value or b"")
            return cls(int(data["batch_id"]), data.get("query_id"))
        except (ValueError, KeyError, TypeError):
            return None


class TopicMarkers:
    def __init__(
        self,
        client_config: dict[str, Any],
        sink_id: str,
        timeout: float = 30.0,
        unavailable_timeout: float = DEFAULT_UNAVAILABLE_TIMEOUT_MS / 1000,
    ):
        self.config = dict(client_config)
        self.sink_id = sink_id
        self.topic = MARKER_TOPIC_PREFIX + sink_id
        self.timeout = timeout
        # How long the topic's partitions, or the cluster, may be unavailable.
        self.unavailable_timeout = unavailable_timeout

    def key(self, partition: int) -> bytes:
        return f"{self.sink_id}/{partition}".encode()

    # -- topic ---------------------------------------------------------------------------

    def _partition_count(self, client: Any) -> int | None:
        # All topics: asking for one topic by name may auto-create it (uncompacted).
        attempt = min(self.timeout, ATTEMPT_TIMEOUT_S, self.unavailable_timeout)
        metadata = while_leader_moves(
            lambda: client.list_topics(timeout=attempt),
            self.unavailable_timeout,
            f"metadata for {self.topic}",
        )
        return self._count_in(metadata)

    def _count_in(self, metadata: Any) -> int | None:
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            return None
        return len(topic.partitions)

    def ensure(self, partition: int, metadata: Any = None) -> None:
        """Create the marker topic, or grow it, so that ``partition`` exists.

        ``metadata``: cluster metadata (all topics) the caller already has, e.g. from its
        producer's ``list_topics()``; when it shows the partition, nothing is requested.
        """
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

        if metadata is not None:
            count = self._count_in(metadata)
            if count is not None and count > partition:
                return
        admin = AdminClient(self.config)
        deadline = time.monotonic() + max(self.timeout, self.unavailable_timeout)
        while True:
            count = self._partition_count(admin)
            if count is not None and count > partition:
                return
            if time.monotonic() > deadline:
                raise MarkerError(f"marker topic {self.topic} has no partition {partition}")
            try:
                if count is None:
                    # replicated as Kafka's own internal topics are (up to 3 copies): on a
                    # broker default of 1 a node's death would stop every sink task that
                    # reads its marker partition
                    brokers = len(admin.list_topics(timeout=self.timeout).brokers)
                    replicas = max(1, min(MARKER_REPLICAS, brokers))
                    new = NewTopic(
                        self.topic,
                        max(MIN_PARTITIONS, partition + 1),
                        replicas,
                        config=marker_topic_config(replicas),
                    )
                    futures = admin.create_topics([new])
                else:
                    total = max(partition + 1, 2 * count)
                    futures = admin.create_partitions([NewPartitions(self.topic, total)])
                for future in futures.values():
                    future.result(self.timeout)
            except KafkaException as error:
                code = error.args[0].code() if error.args else None
                if code not in (
                    KafkaError.TOPIC_ALREADY_EXISTS,
                    KafkaError.INVALID_PARTITIONS,
                ) and not is_unavailable(error):
                    raise MarkerError(f"cannot create marker topic {self.topic}: {error}") from None
                # another task created or grew it, or the controller is moving: look again
                time.sleep(0.1)

    # -- read / write --------------------------------------------------------------------

    def last(self, partition: int) -> Marker | None:
        """The last committed marker of ``partition`` (read_committed), None if none."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                **self.config,
                "group.id": f"onceflow-marker-reader-{self.sink_id}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                # The end of the partition is only reported after an empty fetch, which
                # the broker holds for fetch.wait.max.ms (500 ms by default) waiting for
                # new data: every task would wait that long for its last marker.
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            # Right after the topic was created, or while its leader moves, a broker may
            # not lead the partition (yet): ask until one does.
            attempt = min(self.timeout, ATTEMPT_TIMEOUT_S, self.unavailable_timeout)
            low, high = watermarks(
                consumer,
                self.topic,
                partition,
                attempt,
                max(self.timeout, self.unavailable_timeout),
                f"end of {self.topic}-{partition}",
                also=(KafkaError.UNKNOWN_TOPIC_OR_PART, *NO_LEADER_ERRORS),
            )
            window = 16
            while high > low:
                begin = max(low, high - window)
                consumer.assign([TopicPartition(self.topic, partition, begin)])
                found: list[Marker] = []
                # the consumer waits quietly while the partition has no leader
                deadline = time.monotonic() + max(self.timeout, self.unavailable_timeout)
                while True:
                    if time.monotonic() > deadline:
                        raise MarkerError(f"timed out reading {self.topic}-{partition}")
                    message = consumer.poll(0.5)
                    if message is None:
                        continue
                    if message.error():
                        code = message.error().code()
                        if code == KafkaError._PARTITION_EOF:
                            break
                        if is_leader_change(code) or message.error().retriable():
                            continue  # the consumer fetches from the new leader
                        raise MarkerError(f"reading {self.topic}-{partition}: {message.error()}")
                    if message.key() == self.key(partition):
                        marker = Marker.decode(message.value())
                        if marker is not None:
                            found.append(marker)
                if found:
                    return max(found, key=lambda m: m.batch_id)
                if begin == low:
                    return None
                window *= 8
            return None
        finally:
            consumer.close()

    def write(self, producer: Any, partition: int, marker: Marker) -> None:
        """Produce the marker inside the producer's open transaction."""
        producer.produce(
            self.topic, key=self.key(partition), value=marker.encode(), partition=partition
        )
