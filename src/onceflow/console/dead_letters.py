"""Dead-letter topics: the records a pipeline gave up on, with the error they carry, and
their replay to the topic they came from, exactly once.

A dead-letter topic is one named so (ends in ``.dlq``, ``-dlq``, ``_dlq``, ``.dlt``,
``-dlt`` or contains ``dead-letter``/``deadletter``) or given with ``--dead-letter-topic``.
The error and the source are read from the headers the onceflow Runner writes
(``onceflow-error``, ``onceflow-source`` = ``topic/partition/offset``) or Spring Kafka's
(``kafka_dlt-exception-message``, ``kafka_dlt-original-topic``,
``kafka_dlt-original-partition``).

A replay reads the dead-letter topic from where the last replay stopped (the committed
offsets of the group ``onceflow-console-replay.<topic>``) to its end, produces each record
to its source topic and partition, and commits the group's offsets in the same Kafka
transaction (``transactional.id`` ``onceflow-console-replay.<topic>``): a replay that fails
midway leaves nothing behind, one that succeeded is never replayed again, and a second
console replaying the same topic fences the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import Refused
from onceflow.admin.groups import log_offsets
from onceflow.admin.topics import list_topics
from onceflow.console.messages_page import READ_COMMITTED, Page, browse

DEAD_LETTER_NAME = re.compile(r".*([._-](dlq|dlt)|dead-?letter.*)$", re.IGNORECASE)
ERROR_HEADERS = ("onceflow-error", "kafka_dlt-exception-message")
SOURCE_HEADER = "onceflow-source"  # topic/partition/offset
SPRING_TOPIC, SPRING_PARTITION = "kafka_dlt-original-topic", "kafka_dlt-original-partition"
REPLAY_PREFIX = "onceflow-console-replay."
POLL_S = 1.0
REPLAY_TIMEOUT_S = 60.0


def dead_letter_topics(session: ClusterSession, named: tuple[str, ...] = ()) -> list[str]:
    found = {t.name for t in list_topics(session) if DEAD_LETTER_NAME.fullmatch(t.name)}
    return sorted(found | set(named))


@dataclass(frozen=True, slots=True)
class Source:
    topic: str
    partition: int | None
    offset: int | None


def source_of(headers: list[tuple[str, str | None]]) -> Source | None:
    """Where a dead-lettered record came from, as its headers say."""
    values = dict(headers)
    own = values.get(SOURCE_HEADER)
    if own:
        topic, _, rest = own.rpartition("/")
        topic, _, partition = topic.rpartition("/")
        if topic and partition.isdigit() and rest.isdigit():
            return Source(topic, int(partition), int(rest))
    spring = values.get(SPRING_TOPIC)
    if spring:
        partition = values.get(SPRING_PARTITION)
        return Source(spring, int(partition) if partition and partition.isdigit() else None, None)
    return None


def error_of(headers: list[tuple[str, str | None]]) -> str | None:
    values = dict(headers)
    return next((values[name] for name in ERROR_HEADERS if values.get(name)), None)


def failed(
    session: ClusterSession, topic: str, partition: int, offset: int | None, limit: int = 50
) -> Page:
    """The dead-lettered records, as committed (read_committed)."""
    return browse(session, topic, partition, offset, READ_COMMITTED, limit)


def replay(session: ClusterSession, topic: str) -> int:
    """Replay what the topic holds past the last replay; the number of records replayed."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    if not DEAD_LETTER_NAME.fullmatch(topic) and topic not in dead_letter_topics(session):
        raise Refused(f"{topic!r} is not a dead-letter topic")
    conf = dict(session.conf)
    group = f"{REPLAY_PREFIX}{topic}"
    consumer = Consumer(
        {
            **conf,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({**conf, "transactional.id": group})
    try:
        metadata = consumer.list_topics(topic, timeout=session.timeout).topics[topic]
        partitions = [TopicPartition(topic, p) for p in sorted(metadata.partitions)]
        # to the LSO: a transaction still open in the topic is not replayed yet
        stable = log_offsets(
            session, [(topic, tp.partition) for tp in partitions], read_committed=True
        )
        ends = {tp.partition: stable.get((topic, tp.partition), 0) for tp in partitions}
        committed = consumer.committed(partitions, timeout=session.timeout)
        starts = {tp.partition: max(tp.offset, 0) for tp in committed}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in starts])
        records = _read_until(consumer, starts, ends)
        sources = []
        for message in records:
            headers = [
                (k, v.decode(errors="replace") if v is not None else None)
                for k, v in message.headers() or []
            ]
            source = source_of(headers)
            if source is None:
                raise Refused(
                    f"{topic}:{message.partition()} offset {message.offset()} names "
                    f"no source topic ({SOURCE_HEADER} or {SPRING_TOPIC} header)"
                )
            sources.append(source)
        if not records:
            return 0
        producer.init_transactions(session.timeout)
        producer.begin_transaction()
        for message, source in zip(records, sources, strict=True):
            kept = [(k, v) for k, v in message.headers() or [] if k not in _DEAD_LETTER_KEYS]
            extra = {"partition": source.partition} if source.partition is not None else {}
            producer.produce(source.topic, message.value(), message.key(), headers=kept, **extra)
        positions = [TopicPartition(topic, p, ends[p]) for p in ends]
        producer.send_offsets_to_transaction(
            positions, consumer.consumer_group_metadata(), session.timeout
        )
        producer.commit_transaction(REPLAY_TIMEOUT_S)
        return len(records)
    except KafkaException as error:
        raise Refused(
            f"replay of {topic} failed, nothing of it was written: {error.args[0]}"
        ) from None
    finally:
        consumer.close()


_DEAD_LETTER_KEYS = (*ERROR_HEADERS, SOURCE_HEADER, SPRING_TOPIC, SPRING_PARTITION)


def _read_until(consumer, starts: dict[int, int], ends: dict[int, int]) -> list:
    """Every committed record from ``starts`` up to ``ends`` of each partition."""
    import time

    left = {p for p in ends if starts[p] < ends[p]}
    positions = dict(starts)
    records = []
    deadline = time.monotonic() + REPLAY_TIMEOUT_S
    while left:
        if time.monotonic() > deadline:
            raise Refused(f"could not read the dead-letter records within {REPLAY_TIMEOUT_S:.0f} s")
        for message in consumer.consume(500, POLL_S):
            if message.error() is not None:
                continue
            partition = message.partition()
            if message.offset() < ends[partition]:
                records.append(message)
            positions[partition] = message.offset() + 1
        for partition in list(left):
            position = consumer.position([_tp(consumer, partition)])[0].offset
            if max(position, positions[partition]) >= ends[partition]:
                left.discard(partition)
    return records


def _tp(consumer, partition: int):
    from confluent_kafka import TopicPartition

    (assigned,) = [tp for tp in consumer.assignment() if tp.partition == partition]
    return TopicPartition(assigned.topic, partition)
