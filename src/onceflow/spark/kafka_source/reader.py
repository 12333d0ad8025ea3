"""Read one topic-partition offset range on an executor, as Arrow record batches.

A range ``[start, end)`` is read with a confluent-kafka consumer in assign mode (it never
joins a group and never commits). Under ``read_committed`` a range has gaps: control
records (transaction markers) and aborted records are never delivered, so the range is
done when the consumer's position reaches ``end`` (or a record/EOF at or past ``end``
arrives), never by counting records.

While the partition has no leader (its replicas' nodes are down, or one is being elected),
librdkafka's consumer waits without an error: the task waits with it, for
``kafkaConsumer.pollTimeoutMs`` without records, or up to ``unavailableTimeoutMs`` when the
partition has no leader then. An outage lasts until the task reads again: a leader that is
back in the metadata may still be unreachable for the client for seconds (its reconnect
backoff to a restarted node grows to ``reconnect.backoff.max.ms``, 10 s by default).
"""

from __future__ import annotations

import bisect
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from onceflow.client_errors import is_fatal
from onceflow.spark.kafka_source.offsets import OffsetRange
from onceflow.spark.kafka_source.schema import arrow_schema
from onceflow.spark.leader_change import (
    ATTEMPT_TIMEOUT_S,
    DEFAULT_UNAVAILABLE_TIMEOUT_MS,
    KafkaUnavailableError,
    error_text,
    is_leader_change,
    unavailable,
    watermarks,
)

log = logging.getLogger(__name__)

_DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out or deleted (DeleteRecords), or the topic was deleted before all "
    "its data was processed. If you don't want the query to fail in such cases, set the "
    "source option 'failOnDataLoss' to 'false'."
)
_SKIP_HINT = (
    "Some data may have been lost because they are not available in Kafka any more. "
    "Skipping them because the source option 'failOnDataLoss' is 'false'."
)


class OnceflowDataLossError(RuntimeError):
    """Offsets the query needs are gone (truncated, aged out, topic deleted)."""


def report_data_loss(fail: bool, message: str) -> None:
    """Like Spark's connector: raise with ``failOnDataLoss=true``, else log and go on."""
    if fail:
        raise OnceflowDataLossError(f"{message}. {_DATA_LOSS_HINT}")
    log.warning("%s. %s", message, _SKIP_HINT)


@dataclass(frozen=True)
class ReadSettings:
    """Everything an executor needs besides the range; plain data, picklable."""

    kafka_config: dict[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    max_records_per_batch: int = 10_000
    unavailable_timeout_ms: int = DEFAULT_UNAVAILABLE_TIMEOUT_MS

    def consumer_config(self) -> dict[str, object]:
        config: dict[str, object] = dict(self.kafka_config)
        config.update(
            {
                # A private group id: the reader only uses assign() and never commits.
                "group.id": f"onceflow-spark-{uuid.uuid4().hex}-executor",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        config.setdefault("isolation.level", "read_committed")
        # librdkafka pauses fetching for fetch.queue.backoff.ms (default 1000 ms) whenever
        # its prefetch queue holds more than queued.min.messages (100,000): a task reading
        # a large range then waits about a second after every 100,000 records. Resume
        # fetching as soon as the queue has room instead.
        config.setdefault("fetch.queue.backoff.ms", "20")
        return config


class _Columns:
    """Columns of the Arrow batch being built, filled a ``consume()`` result at a time.

    Hot path. Per message: one C-level ``map`` of an unbound ``Message`` method per field,
    no Python bytecode. Per batch: what is the same for every record (topic, partition,
    usually the timestamp type) and offsets without gaps are made by Arrow, not converted
    from Python lists, which costs as much as the extraction.
    """

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.count = 0
        self.first_offset = -1  # while the batch's offsets have no gap
        self.offsets: list[int] | None = None  # every offset, once they have one
        self.kinds: list[int] = []
        self.millis: list[int] = []
        self.headers: list[list[dict] | None] = []

    def __len__(self) -> int:
        return self.count

    def add(self, messages: list, offsets: Sequence[int]) -> None:
        """Data messages (no errors) of one partition, in offset order, with their offsets."""
        self.keys += map(_KEY, messages)
        self.values += map(_VALUE, messages)
        if self.offsets is None:
            if self.count == 0 and isinstance(offsets, range):
                self.first_offset = offsets.start
            elif not (
                isinstance(offsets, range) and offsets.start == self.first_offset + self.count
            ):
                self.offsets = list(range(self.first_offset, self.first_offset + self.count))
        if self.offsets is not None:
            self.offsets += offsets
        self.count += len(offsets)
        kinds, millis = zip(*map(_TIMESTAMP, messages), strict=True)
        self.kinds += kinds
        self.millis += millis
        if self.include_headers:
            for message in messages:
                headers = message.headers()
                self.headers.append(
                    [{"key": k, "value": v} for k, v in headers] if headers is not None else []
                )

    def to_batch(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        n = self.count
        if self.offsets is None:
            ones = pa.repeat(pa.scalar(1, pa.int64()), n)
            offsets = pc.cumulative_sum(ones, start=self.first_offset - 1)
        else:
            offsets = pa.array(self.offsets, pa.int64())
        # confluent-kafka's timestamp types 0/1/2 (none, CreateTime, LogAppendTime) are
        # Kafka's ids -1/0/1 plus one.
        if n and self.kinds.count(self.kinds[0]) == n:
            timestamp_types = pa.repeat(pa.scalar(self.kinds[0] - 1, pa.int32()), n)
        else:
            timestamp_types = pc.subtract(pa.array(self.kinds, pa.int32()), 1)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            offsets,
            # int64 then a view: Python ints straight into a timestamp array take longer
            pa.array(self.millis, pa.int64()).view(_MILLIS).cast(_MICROS),
            timestamp_types,
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        self.clear()
        return batch


def run_offsets(run: list) -> Sequence[int]:
    """The offsets of a run of data messages of one partition: a ``range`` when they have
    no gaps (offsets only grow, so first and last tell), else one call per message."""
    first, last = run[0].offset(), run[-1].offset()
    if last - first == len(run) - 1:
        return range(first, last + 1)
    return list(map(_OFFSET, run))


_KEY = Message.key
_VALUE = Message.value
_OFFSET = Message.offset
_TIMESTAMP = Message.timestamp
_ERROR = Message.error
_MILLIS = pa.timestamp("ms", tz="UTC")
_MICROS = pa.timestamp("us", tz="UTC")
# Messages per consume() call. confluent-kafka's Message objects are tracked by Python's
# cyclic garbage collector: thousands of them alive at once survive into the old
# generations and trigger full collections of the whole worker process (which holds all
# of pyspark), which cost more than the reading itself. Runs below the first generation's
# threshold (700) die young.
_CONSUME_CHUNK = 500
# A range holds records that exist: a task that gets none for this long asks the metadata,
# once a second, whether the partition still has a leader.
_LEADER_CHECK_AFTER_S = 1.0


def read_range(offset_range: OffsetRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow batches of Spark's Kafka schema."""
    if offset_range.size == 0:
        return
    topic, partition, end = offset_range.topic, offset_range.partition, offset_range.end
    schema = arrow_schema(settings.include_headers)
    columns = _Columns(settings.include_headers)
    consumer = Consumer(settings.consumer_config())
    try:
        tp = TopicPartition(topic, partition, offset_range.start)
        consumer.assign([tp])
        expected = offset_range.start  # next offset we have not yet seen
        timeout = settings.poll_timeout_ms / 1000.0
        deadline = time.monotonic() + timeout
        outage = _Outage(topic, partition, settings.unavailable_timeout_ms)
        done = False
        while not done:
            # consume() waits for num_messages or the timeout: ask for no more than the
            # range still holds, so a task without gaps returns as soon as it has its data
            # (and for small runs, see _CONSUME_CHUNK).
            wanted = max(
                1,
                min(settings.max_records_per_batch - len(columns), end - expected, _CONSUME_CHUNK),
            )
            messages = consumer.consume(num_messages=wanted, timeout=0.05)
            # Errors and events (EOF, offset reset, ...) are rare: take the runs of data
            # messages between them in bulk, and handle each error where it occurred.
            errors = list(map(_ERROR, messages))  # None or a KafkaError, always true
            failed = [i for i, e in enumerate(errors) if e is not None] if any(errors) else []
            failed.append(len(messages))
            position = 0
            for index in failed:
                if index > position:
                    run = messages[position:index]
                    offsets = run_offsets(run)
                    if offsets[-1] >= end:  # the range ends inside this run
                        cut = bisect.bisect_left(offsets, end)
                        run, offsets = run[:cut], offsets[:cut]
                        done = True
                    if offsets:
                        columns.add(run, offsets)
                        expected = offsets[-1] + 1
                        deadline = time.monotonic() + timeout
                        outage.over()
                    if done:
                        break
                position = index + 1
                if index == len(messages):
                    break
                error = errors[index]
                code = error.code()
                if code == KafkaError._PARTITION_EOF:
                    if messages[index].offset() >= end:
                        done = True
                        break
                    continue
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low = _log_start(consumer, topic, partition, settings.unavailable_timeout_ms)
                    report_data_loss(
                        settings.fail_on_data_loss,
                        f"Cannot fetch offset {expected} of {topic}-{partition}: the "
                        f"partition now starts at offset {low}",
                    )
                    if low >= end:
                        done = True
                        break
                    expected = max(expected, low)
                    consumer.assign([TopicPartition(topic, partition, expected)])
                    deadline = time.monotonic() + timeout
                    break
                if code in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    KafkaError._UNKNOWN_TOPIC,
                    KafkaError._UNKNOWN_PARTITION,
                ):
                    report_data_loss(
                        settings.fail_on_data_loss,
                        f"Cannot read {topic}-{partition} offsets [{expected}, {end}): "
                        f"{error.str()}",
                    )
                    done = True
                    break
                if is_fatal(error) or not (error.retriable() or is_leader_change(code)):
                    raise KafkaException(error)
                log.debug("transient error reading %s-%s: %s", topic, partition, error)
            if len(columns) >= settings.max_records_per_batch:
                yield columns.to_batch(topic, partition, schema)
            if done or expected >= end:
                break
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= end:
                break
            if position > expected:
                # Gaps (control records, aborted or compacted data) the client skipped.
                expected = position
                deadline = time.monotonic() + timeout
                outage.over()
            now = time.monotonic()
            idle = now - deadline + timeout
            if idle >= _LEADER_CHECK_AFTER_S and outage.check_due(now):
                why = _no_leader(consumer, topic, partition)
                if why is not None or outage.ongoing:
                    outage.waiting(idle, why, expected, end)
                elif now > deadline:
                    raise TimeoutError(
                        f"Timed out after {settings.poll_timeout_ms} ms reading "
                        f"{topic}-{partition} offsets [{expected}, {end}) (range "
                        f"[{offset_range.start}, {end})); set 'kafkaConsumer.pollTimeoutMs' to "
                        "wait longer"
                    )
                else:
                    outage.checked(now)
        if len(columns):
            yield columns.to_batch(topic, partition, schema)
    finally:
        consumer.close()


class _Outage:
    """A range reader's wait for a partition without a leader: from the last records
    before a metadata check found none until the reader gets records again, at most
    ``unavailableTimeoutMs``."""

    def __init__(self, topic: str, partition: int, unavailable_timeout_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.timeout_ms = unavailable_timeout_ms
        self.since: float | None = None  # when the wait began (the last records before it)
        self.leader_back = False
        self.next_check = 0.0  # while waiting, the partition's metadata once a second

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def check_due(self, now: float) -> bool:
        return now >= self.next_check

    def waiting(self, waited_s: float, why: BaseException | None, expected: int, end: int) -> None:
        """Another second without records; ``why`` the partition has no leader (None: it
        has one again). Raises ``KafkaUnavailableError`` once the time is up."""
        now = time.monotonic()
        if self.since is None:
            self.since = now - waited_s
            log.warning(
                "%s-%s has no leader (%s): waiting for it up to %d ms ('unavailableTimeoutMs')",
                self.topic,
                self.partition,
                error_text(why) if why is not None else "none",
                self.timeout_ms,
            )
        elif why is None and not self.leader_back:
            log.warning("%s-%s has a leader again", self.topic, self.partition)
        self.leader_back = why is None
        if (now - self.since) * 1000 >= self.timeout_ms:
            raise unavailable(
                f"reading {self.topic}-{self.partition} offsets [{expected}, {end})",
                now - self.since,
                self.timeout_ms / 1000,
                why,
            )
        self.checked(now)

    def checked(self, now: float) -> None:
        self.next_check = now + 1.0

    def over(self) -> None:
        """The reader got records (or skipped a gap): the partition is readable again."""
        if self.since is not None:
            log.warning(
                "%s-%s readable again after %.1f s",
                self.topic,
                self.partition,
                time.monotonic() - self.since,
            )
        self.since = None
        self.leader_back = False
        self.next_check = 0.0


def _no_leader(consumer: Consumer, topic: str, partition: int) -> BaseException | None:
    """Why ``topic-partition`` cannot be read now (no leader, no answer), or None when it
    has a leader."""
    try:
        metadata = consumer.list_topics(topic, timeout=ATTEMPT_TIMEOUT_S)
    except KafkaException as error:
        return error
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return KafkaException(found.error) if found is not None else None
    state = found.partitions.get(partition)
    if state is None:
        return None
    if state.leader < 0 or state.error is not None:
        return KafkaException(state.error or KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
    return None


def _log_start(consumer: Consumer, topic: str, partition: int, unavailable_timeout_ms: int) -> int:
    try:
        low, _high = watermarks(
            consumer,
            topic,
            partition,
            ATTEMPT_TIMEOUT_S,
            unavailable_timeout_ms / 1000,
            f"start of {topic}-{partition}",
        )
        return low
    except KafkaException as error:
        if isinstance(error, KafkaUnavailableError):
            raise
        raise OnceflowDataLossError(
            f"Cannot read {topic}-{partition} and cannot find where it starts: {error}"
        ) from error
