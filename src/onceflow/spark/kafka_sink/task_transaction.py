"""One task of the ``onceflow-kafka`` sink: its rows and its marker in one Kafka transaction.

Each task writes its whole output in ONE Kafka transaction with the transactional id
``onceflow-<sinkId>-<task partition>``. The id is stable per sink and task partition, so
a retried or speculative attempt's ``init_transactions`` fences the previous attempt and
aborts its open transaction. Inside the same transaction the task writes an idempotency
marker for (batch, task partition) (see ``markers``); before writing, it reads the last
committed marker and, when its batch id is not newer, writes nothing: a replayed batch
(after a driver crash between the task commits and Spark's commit) is a no-op.

The task rides out a leader election of an output or marker partition, a partition
without a leader and a transaction coordinator that moves, for up to the sink's
``unavailableTimeoutMs``: librdkafka keeps its records and retries them (until
``message.timeout.ms``, which the sink's ``transaction.timeout.ms`` default leaves longer
than that), and ``init_transactions`` and ``commit_transaction`` are asked again after a
retriable error (see ``onceflow.spark.leader_change``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from onceflow.crash_points import spark_step_reached
from onceflow.producing import abort_transaction
from onceflow.spark.common import current_task
from onceflow.spark.kafka_sink.markers import Marker, TopicMarkers
from onceflow.spark.kafka_sink.options import KafkaSinkError, KafkaSinkOptions
from onceflow.spark.leader_change import ATTEMPT_TIMEOUT_S, while_leader_moves

log = logging.getLogger(__name__)

_COLUMNS = {"key", "value", "topic", "partition", "headers"}


class SinkReusedError(RuntimeError):
    """The sink's markers were written by another query (deleted checkpoint?)."""


@dataclass
class KafkaTaskCommit(WriterCommitMessage):
    partition: int
    batch_id: int | None
    records: int
    skipped: bool  # a replayed batch: this task partition's output was already committed


def produce_batches(producer: Any, batches: Iterator[Any], default_topic: str | None) -> int:
    """Produce every row of the Arrow record batches; returns the number of rows."""
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        names = [name.lower() for name in batch.schema.names]
        columns = {
            name: batch.column(names.index(name)).to_pylist() for name in _COLUMNS if name in names
        }
        values = columns["value"]
        keys = columns.get("key") or repeat(None)
        if "topic" not in columns and "partition" not in columns and "headers" not in columns:
            if not default_topic:
                raise KafkaSinkError("a row has a null 'topic' and no 'topic' option is set")
            _produce_values(producer, default_topic, keys, values)
        else:
            _produce_rows(producer, default_topic, keys, values, columns)
        count += batch.num_rows
        producer.poll(0)  # serve delivery reports
    return count


def _produce_values(producer: Any, topic: str, keys: Iterable[Any], values: list[Any]) -> None:
    """The common case, one topic and the partitioner's choice: as few Python steps as can be."""
    produce = producer.produce
    for key, value in zip(keys, values, strict=False):  # keys may be an endless repeat
        try:
            produce(topic, value, key)
        except BufferError:
            _produce_when_room(producer, topic, value=value, key=key)


def _produce_rows(
    producer: Any,
    default_topic: str | None,
    keys: Iterable[Any],
    values: list[Any],
    columns: dict[str, list[Any]],
) -> None:
    none = repeat(None)
    rows = zip(
        columns.get("topic") or none,
        keys,
        values,
        columns.get("partition") or none,
        columns.get("headers") or none,
        strict=False,  # the missing columns are endless repeats of None
    )
    for topic, key, value, partition, headers in rows:
        topic = topic or default_topic
        if not topic:
            raise KafkaSinkError("a row has a null 'topic' and no 'topic' option is set")
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = [(h["key"], h["value"]) for h in headers]
        try:
            producer.produce(topic, **kwargs)
        except BufferError:
            _produce_when_room(producer, topic, **kwargs)


def _produce_when_room(producer: Any, topic: str, **kwargs: Any) -> None:
    while True:
        producer.poll(0.05)  # local queue full: let deliveries drain
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            continue


@dataclass
class _Transactional:
    """A task's producer after ``init_transactions``, and its partition's last marker."""

    producer: Any
    markers: TopicMarkers
    last: Marker | None


def _open(options: KafkaSinkOptions, partition: int, batch_id: int | None) -> _Transactional:
    from confluent_kafka import Producer

    transactional_id = f"onceflow-{options.sink_id}-{partition}"
    producer = Producer({**options.producer_config, "transactional.id": transactional_id})
    # Metadata first: it connects the producer to the cluster, without which
    # init_transactions finds no broker and waits for librdkafka's coordinator timer
    # (about 500 ms); the marker topic's partition count comes with it.
    attempt = min(options.timeout_s, ATTEMPT_TIMEOUT_S, options.unavailable_timeout_s)
    metadata = while_leader_moves(
        lambda: producer.list_topics(timeout=attempt),
        options.unavailable_timeout_s,
        f"metadata of {options.producer_config.get('bootstrap.servers')}",
    )
    # Fences earlier attempts of this task; a call that timed out resumes when repeated.
    while_leader_moves(
        lambda: producer.init_transactions(options.timeout_s),
        options.unavailable_timeout_s,
        f"init_transactions of {transactional_id}",
    )
    markers = TopicMarkers(
        {k: v for k, v in options.producer_config.items() if k not in _PRODUCER_ONLY},
        options.sink_id,
        options.timeout_s,
        options.unavailable_timeout_s,
    )
    last = None
    if batch_id is not None:
        markers.ensure(partition, metadata)
        last = markers.last(partition)
    return _Transactional(producer, markers, last)


def write_task(options: KafkaSinkOptions, batches: Iterator[Any]) -> KafkaTaskCommit:
    """One task: its rows and its marker in one Kafka transaction (or nothing on replay)."""
    task = current_task()
    partition, batch_id, query_id = task.partition, task.batch_id, task.query_id

    # Open the transactional producer and read the last marker while the task's first
    # rows are computed upstream (both mostly wait on the network).
    with ThreadPoolExecutor(1, thread_name_prefix="onceflow-kafka-sink") as pool:
        opening = pool.submit(_open, options, partition, batch_id)
        batches = iter(batches)
        first = next((b for b in batches if b.num_rows), None)
        txn = opening.result()
    if first is None:  # nothing to write: no transaction, no marker needed
        return KafkaTaskCommit(partition, batch_id, 0, False)

    producer, last = txn.producer, txn.last
    if batch_id is not None and last is not None:
        if last.query_id and query_id and last.query_id != query_id:
            raise SinkReusedError(
                f"sinkId {options.sink_id!r} was last written by streaming query "
                f"{last.query_id} (batch {last.batch_id}), not by this query {query_id}: "
                "the checkpoint was deleted or the sinkId is used twice. The sink cannot "
                "tell which outputs exist; use a new sinkId for a new checkpoint."
            )
        if batch_id <= last.batch_id:
            for _ in batches:  # drain: Spark expects the input to be consumed
                pass
            log.warning(
                "sink %s batch %d partition %d: already committed, nothing written",
                options.sink_id,
                batch_id,
                partition,
            )
            return KafkaTaskCommit(partition, batch_id, 0, True)
    producer.begin_transaction()
    try:
        count = produce_batches(producer, _chain(first, batches), options.topic)
        if batch_id is not None:
            txn.markers.write(producer, partition, Marker(batch_id, query_id))
        spark_step_reached("kafka.before_task_commit", batch_id, partition)
        # A commit that timed out (a record still waits for its partition's leader)
        # resumes when repeated; one that needs an abort is not retriable and is raised.
        while_leader_moves(
            lambda: producer.commit_transaction(options.timeout_s),
            options.unavailable_timeout_s,
            f"commit_transaction of onceflow-{options.sink_id}-{partition}",
        )
    except BaseException:
        try:
            abort_transaction(producer, options.timeout_s)
        except Exception as error:  # the next attempt's init_transactions aborts it anyway
            log.warning("sink %s: abort_transaction failed: %s", options.sink_id, error)
        raise
    spark_step_reached("kafka.after_task_commit", batch_id, partition)
    return KafkaTaskCommit(partition, batch_id, count, False)


_PRODUCER_ONLY = {
    "partitioner",
    "linger.ms",
    "transaction.timeout.ms",
    "acks",
    "compression.type",
    "batch.size",
    "batch.num.messages",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "retries",
    "max.in.flight.requests.per.connection",
}


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
