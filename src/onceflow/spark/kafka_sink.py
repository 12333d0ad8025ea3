"""``format("onceflow-kafka")``: an exactly-once Kafka sink built on Kafka transactions.

Each task writes its whole output in ONE Kafka transaction with the transactional id
``onceflow-<sinkId>-<task partition>``. The id is stable per sink and task partition, so
a retried or speculative attempt's ``init_transactions`` fences the previous attempt and
aborts its open transaction. Inside the same transaction the task writes an idempotency
marker for (batch, task partition) (see ``sink_markers``); before writing, it reads the
last committed marker and, when its batch id is not newer, writes nothing: a replayed
batch (after a driver crash between the task commits and Spark's commit) is a no-op.

Input columns are those of Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string, or the ``topic`` option), ``partition``
(int) and ``headers`` (array<struct<key:string,value:binary>>). Keys without an explicit
partition are placed with Kafka's Java-compatible murmur2 partitioner.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from onceflow.spark import crash
from onceflow.spark.sink_markers import Marker, TopicMarkers

log = logging.getLogger(__name__)

SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
# queryName: Spark passes writeStream.queryName(...) to the sink as an option.
_KNOWN = {"topic", "sinkid", "checkpointlocation", "path", "timeoutms", "queryname"}
_REFUSED_KAFKA = {
    "transactional.id": "the sink derives it: onceflow-<sinkId>-<task partition>",
    "enable.idempotence": "transactions need the idempotent producer",
    "key.serializer": "cast the key column to string or binary",
    "value.serializer": "cast the value column to string or binary",
}
_COLUMNS = {"key", "value", "topic", "partition", "headers"}


class KafkaSinkError(ValueError):
    """An option or input column of the Kafka sink is missing or wrong."""


class SinkReusedError(RuntimeError):
    """The sink's markers were written by another query (deleted checkpoint?)."""


@dataclass(frozen=True)
class KafkaSinkOptions:
    topic: str | None
    sink_id: str
    producer_config: dict[str, str]
    timeout_s: float


def parse_kafka_options(options: Mapping[str, Any], streaming: bool) -> KafkaSinkOptions:
    opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
    config: dict[str, str] = {}
    for name, value in opts.items():
        if name.startswith("kafka."):
            key = name[len("kafka.") :]
            if key in _REFUSED_KAFKA:
                raise KafkaSinkError(f"option kafka.{key} is not allowed: {_REFUSED_KAFKA[key]}")
            config[key] = value
        elif name not in _KNOWN:
            raise KafkaSinkError(
                f"unknown option {name!r} for onceflow-kafka "
                "(known: kafka.*, topic, sinkId, checkpointLocation, timeoutMs)"
            )
    if not config.get("bootstrap.servers"):
        raise KafkaSinkError("onceflow-kafka needs the option 'kafka.bootstrap.servers'")
    sink_id = opts.get("sinkid")
    if not sink_id:
        if streaming:
            raise KafkaSinkError(
                "onceflow-kafka needs the option 'sinkId' (stable name of this sink: its "
                "transactional ids and idempotency markers are derived from it)"
            )
        import uuid

        sink_id = f"batch-{uuid.uuid4().hex}"
    if not SINK_ID.fullmatch(sink_id):
        raise KafkaSinkError(f"sinkId {sink_id!r}: use letters, digits, '.', '_' and '-'")
    config.setdefault("partitioner", "murmur2_random")
    config.setdefault("linger.ms", "5")
    config.setdefault("transaction.timeout.ms", "60000")
    # librdkafka waits reconnect.backoff.ms (100 ms) before its first connection to the
    # transaction coordinator; every task opens a new producer.
    config.setdefault("reconnect.backoff.ms", "10")
    try:
        timeout_s = int(opts.get("timeoutms", "60000")) / 1000
    except ValueError:
        raise KafkaSinkError("timeoutMs must be an integer (milliseconds)") from None
    return KafkaSinkOptions(opts.get("topic") or None, sink_id, config, timeout_s)


def check_input_schema(schema: StructType, topic: str | None) -> None:
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KafkaSinkError("onceflow-kafka needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise KafkaSinkError(f"column {name!r} must be string or binary (cast it)")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise KafkaSinkError("column 'topic' must be a string")
    if "topic" not in fields and not topic:
        raise KafkaSinkError("give the option 'topic' or a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaSinkError("column 'partition' must be an int")
    if "headers" in fields and not isinstance(fields["headers"], ArrayType):
        raise KafkaSinkError("column 'headers' must be array<struct<key:string,value:binary>>")


@dataclass
class KafkaTaskCommit(WriterCommitMessage):
    partition: int
    batch_id: int | None
    records: int
    skipped: bool  # a replayed batch: this task partition's output was already committed


def _produce(producer: Any, batches: Iterator[Any], default_topic: str | None) -> int:
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

    producer = Producer(
        {**options.producer_config, "transactional.id": f"onceflow-{options.sink_id}-{partition}"}
    )
    # Metadata first: it connects the producer to the cluster, without which
    # init_transactions finds no broker and waits for librdkafka's coordinator timer
    # (about 500 ms); the marker topic's partition count comes with it.
    metadata = producer.list_topics(timeout=options.timeout_s)
    producer.init_transactions(options.timeout_s)  # fences earlier attempts of this task
    markers = TopicMarkers(
        {k: v for k, v in options.producer_config.items() if k not in _PRODUCER_ONLY},
        options.sink_id,
        options.timeout_s,
    )
    last = None
    if batch_id is not None:
        markers.ensure(partition, metadata)
        last = markers.last(partition)
    return _Transactional(producer, markers, last)


def write_task(options: KafkaSinkOptions, batches: Iterator[Any]) -> KafkaTaskCommit:
    """One task: its rows and its marker in one Kafka transaction (or nothing on replay)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    batch_prop = context.getLocalProperty("streaming.sql.batchId") if context else None
    batch_id = int(batch_prop) if batch_prop is not None else None
    query_id = context.getLocalProperty("sql.streaming.queryId") if context else None

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
        count = _produce(producer, _chain(first, batches), options.topic)
        if batch_id is not None:
            txn.markers.write(producer, partition, Marker(batch_id, query_id))
        crash.reached("kafka.before_task_commit", batch_id, partition)
        producer.commit_transaction(options.timeout_s)
    except BaseException:
        try:
            producer.abort_transaction(options.timeout_s)
        except Exception as error:  # the next attempt's init_transactions aborts it anyway
            log.warning("sink %s: abort_transaction failed: %s", options.sink_id, error)
        raise
    crash.reached("kafka.after_task_commit", batch_id, partition)
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


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: KafkaSinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaTaskCommit:
        return write_task(self.options, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        crash.reached("kafka.before_commit", batchId)
        done = [m for m in messages if m is not None]
        log.info(
            "sink %s batch %d: %d records in %d task transactions (%d replayed tasks skipped)",
            self.options.sink_id,
            batchId,
            sum(m.records for m in done),
            sum(1 for m in done if m.records),
            sum(1 for m in done if m.skipped),
        )

    def abort(self, messages: list[Any], batchId: int) -> None:
        # Committed task transactions stay; the batch's replay skips them by their markers.
        log.warning("sink %s batch %d aborted by Spark", self.options.sink_id, batchId)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: one transaction per task (no markers: a retried task that had
    already committed writes its rows again)."""

    def __init__(self, options: KafkaSinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaTaskCommit:
        return write_task(self.options, iterator)

    def commit(self, messages: list[Any]) -> None:
        pass

    def abort(self, messages: list[Any]) -> None:
        pass


class KafkaSinkDataSource(DataSource):
    """``format("onceflow-kafka")``: exactly-once writes to Kafka topics."""

    @classmethod
    def name(cls) -> str:
        return "onceflow-kafka"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_kafka_options(self.options, streaming=True)
        check_input_schema(schema, options.topic)
        return KafkaStreamWriter(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_kafka_options(self.options, streaming=False)
        check_input_schema(schema, options.topic)
        return KafkaBatchWriter(options)
