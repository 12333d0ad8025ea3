"""Readers that turn topics and database tables into audit inputs and sinks.

Topics are read with a confluent-kafka consumer in assign mode (no group, nothing
committed) from the log start to the last stable offset of each partition, so open
transactions are excluded and the read ends. Whether a record belongs to an aborted
transaction is decided from the log itself, independently of the broker's
read_committed filtering: a raw read_uncommitted fetch walks the record batch headers and
the commit/abort control markers of each producer (``transaction_outcomes``).
"""

from __future__ import annotations

import datetime
import re
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onceflow.admin.connect import principal_of
from onceflow.admin.topics import PARTITION_ERRORS, partition_problem
from onceflow.db import quote_identifier
from onceflow.verify.audit import InputEvent, OutputRecord, Sink, Unreadable, audit
from onceflow.verify.extract import ExtractError, Extractor, FieldMissing, FieldSpec
from onceflow.verify.report import AuditReport

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


class SourceError(RuntimeError):
    """A topic or table cannot be read completely."""


class SourceNotFound(SourceError):
    """A topic to audit does not exist (an unknown name: exit 1, like other commands)."""


class SourceNotAuthorized(SourceError):
    """The principal may not describe or read a topic to audit."""


Cluster = str | Mapping[str, Any]  # bootstrap servers, or a whole librdkafka client config


def client_conf(cluster: Cluster) -> dict[str, Any]:
    """The librdkafka config of ``cluster`` (quiet: errors are raised, not logged)."""
    if isinstance(cluster, str):
        return {"bootstrap.servers": cluster, "log_level": 0}
    return {"log_level": 0, **cluster}


def matching_topics(cluster: Cluster, pattern: str, timeout: float = 15.0) -> list[str]:
    """Topics whose whole name matches the regular expression (internal ones left out)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient(client_conf(cluster)).list_topics(timeout=timeout)
    except KafkaException as error:
        raise SourceError(f"cannot list topics: {error}") from None
    regex = re.compile(pattern)
    return sorted(
        name
        for name, topic in metadata.topics.items()
        if topic.error is None and not name.startswith("__") and regex.fullmatch(name)
    )


@dataclass(frozen=True, slots=True)
class PartitionRange:
    start: int  # log start offset
    stable: int  # last stable offset (end of the read_committed view)
    high: int  # high watermark


@dataclass(frozen=True, slots=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(slots=True)
class TransactionOutcomes:
    """Offsets of one partition that belong to aborted (or still open) transactions."""

    aborted: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    open: list[tuple[int, int]] = field(default_factory=list)

    def is_aborted(self, offset: int) -> bool:
        return any(first <= offset <= last for first, last in self.aborted)


def fetch_error_in_words(code: int) -> str:
    """A Fetch error code as Kafka names it, with what it means for the audit."""
    from onceflow.protocol.errors import ErrorCode

    try:
        name = ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"
    return PARTITION_ERRORS.get(name, name)


def topic_ranges(
    bootstrap: Cluster, topic: str, timeout: float = 15.0
) -> dict[int, PartitionRange]:
    """Log start, last stable offset and high watermark of every partition of ``topic``."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(client_conf(bootstrap))
    try:
        metadata = admin.list_topics(timeout=timeout)  # all topics: never auto-create
    except KafkaException as error:
        raise SourceError(f"topic {topic!r}: cannot read the cluster's metadata: {error}") from None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        _require_topic(admin, topic, timeout, principal_of(client_conf(bootstrap)))
        reason = described.error if described is not None else "not found"
        raise SourceError(f"topic {topic!r}: {reason}")
    partitions = sorted(described.partitions)
    for number in partitions:
        problem = partition_problem(described.partitions[number].error)
        if problem is not None:
            raise SourceError(f"topic {topic!r}: partition {topic}-{number} is {problem}")

    def query(spec: Any, isolation: Any) -> dict[int, int]:
        futures = admin.list_offsets(
            {TopicPartition(topic, p): spec for p in partitions},
            isolation_level=isolation,
            request_timeout=timeout,
        )
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    start = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    stable = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return {p: PartitionRange(start[p], stable[p], high[p]) for p in partitions}


HEALTH_CHECK_S = 1.0  # how often a read asks Metadata whether its partitions are online


def _require_online(consumer: Any, topic: str, partitions: Iterable[int]) -> None:
    """SourceError naming the first of ``partitions`` that Metadata reports offline."""
    from confluent_kafka import KafkaException

    try:
        described = consumer.list_topics(topic, timeout=5).topics.get(topic)
    except KafkaException:
        return  # unreachable now: the read's own deadline reports it
    if described is None:
        return
    for number in sorted(partitions):
        found = described.partitions.get(number)
        problem = partition_problem(found.error) if found is not None else None
        if problem is not None:
            raise SourceError(f"topic {topic!r}: partition {topic}-{number} is {problem}")


def _require_topic(admin: Any, topic: str, timeout: float, principal: str) -> None:
    """SourceNotFound or SourceNotAuthorized for a topic missing from the metadata."""
    from confluent_kafka import KafkaException, TopicCollection

    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as error:
        code = error.args[0].name() if error.args else ""
        if code.endswith("_AUTHORIZATION_FAILED"):
            raise SourceNotAuthorized(
                f"topic {topic!r}: not authorized ({code}, principal {principal})"
            ) from None
        if code in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
            raise SourceNotFound(f"topic {topic!r} does not exist") from None


def read_topic(
    bootstrap: Cluster,
    topic: str,
    ranges: dict[int, PartitionRange],
    isolation: str = READ_COMMITTED,
    timeout: float = 60.0,
) -> list[RawRecord]:
    """Every record of ``topic`` from log start up to each partition's stable offset."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from onceflow.client_errors import is_fatal

    ends = {p: r.stable for p, r in ranges.items()}
    pending = {p for p, r in ranges.items() if r.start < r.stable}
    if not pending:
        return []
    consumer = Consumer(
        {
            **client_conf(bootstrap),
            "group.id": "onceflow-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    records: list[RawRecord] = []
    try:
        consumer.assign([TopicPartition(topic, p, ranges[p].start) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        next_health_check = time.monotonic() + HEALTH_CHECK_S
        while pending:
            if time.monotonic() > deadline:
                raise SourceError(
                    f"topic {topic!r}: partitions {sorted(pending)} not read to their end "
                    f"within {timeout:.0f} s"
                )
            if time.monotonic() > next_health_check:
                # librdkafka retries a partition that went offline in silence: ask Metadata.
                _require_online(consumer, topic, pending)
                next_health_check = time.monotonic() + HEALTH_CHECK_S
            for message in consumer.consume(1000, 0.5):
                partition = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= ends[partition]:
                            pending.discard(partition)
                        continue
                    if is_fatal(error):
                        raise SourceError(f"topic {topic!r}: {error}")
                    continue
                offset = message.offset()
                if offset >= ends[partition]:
                    pending.discard(partition)
                    continue
                records.append(RawRecord(partition, offset, message.key(), message.value()))
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
            for position in consumer.position([TopicPartition(topic, p) for p in sorted(pending)]):
                if position.offset >= 0 and position.offset >= ends[position.partition]:
                    pending.discard(position.partition)
    finally:
        consumer.close()
    return records


def transaction_outcomes(
    bootstrap: Cluster,
    topic: str,
    ranges: dict[int, PartitionRange],
    timeout: float = 30.0,
) -> dict[int, TransactionOutcomes]:
    """Walk each partition's batches (read_uncommitted) and pair data with markers."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i8, i32, i64

    from onceflow.admin.errors import AdminError, Unreachable
    from onceflow.log.batch import CONTROL_ABORT, control_type_of, iter_headers
    from onceflow.verify.leaders import LEADER_MOVED, NoLeader, PartitionLeaders

    outcomes: dict[int, TransactionOutcomes] = {}
    with PartitionLeaders(client_conf(bootstrap), topic, timeout) as leaders:
        for partition, extent in sorted(ranges.items()):
            result = outcomes[partition] = TransactionOutcomes()
            open_batches: dict[int, list[tuple[int, int]]] = defaultdict(list)
            offset = extent.start
            deadline = time.monotonic() + timeout
            while offset < extent.high:
                try:
                    wire = leaders.client(partition)
                except (NoLeader, Unreachable, AdminError) as error:
                    raise SourceError(f"topic {topic!r}: {error}") from None
                response = wire.request(
                    FetchRequest,
                    max_wait=datetime.timedelta(milliseconds=100),
                    min_bytes=i32(1),
                    max_bytes=i32(16 << 20),
                    isolation_level=i8(0),
                    topics=(
                        FetchTopic(
                            topic=topic,
                            partitions=(
                                FetchPartition(
                                    partition=i32(partition),
                                    fetch_offset=i64(offset),
                                    partition_max_bytes=i32(8 << 20),
                                ),
                            ),
                        ),
                    ),
                )
                (data,) = response.responses[0].partitions
                if data.error_code in LEADER_MOVED and time.monotonic() < deadline:
                    leaders.moved()
                    time.sleep(0.2)
                    continue
                if data.error_code != 0:
                    raise SourceError(
                        f"topic {topic!r}: partition {topic}-{partition} at offset {offset}: "
                        f"{fetch_error_in_words(data.error_code)}"
                    )
                records = bytes(data.records or b"")
                progressed = False
                for header in iter_headers(records):
                    if header.next_offset <= offset:
                        continue
                    progressed = True
                    offset = header.next_offset
                    if not header.is_transactional or not header.has_producer_id:
                        continue
                    if header.is_control:
                        batches = open_batches.pop(header.producer_id, [])
                        if control_type_of(records, header) == CONTROL_ABORT:
                            result.aborted.extend(batches)
                    else:
                        open_batches[header.producer_id].append(
                            (header.base_offset, header.last_offset)
                        )
                if not progressed:
                    break
            result.open = sorted(r for batches in open_batches.values() for r in batches)
    return outcomes


@dataclass(slots=True)
class InputRead:
    events: list[InputEvent]
    aborted_ids: set[str]
    unreadable: list[Unreadable]
    aborted_visible: list[InputEvent]  # read_committed returned aborted data (broker bug)
    ranges: dict[int, PartitionRange]  # of the only input topic ({} for several)
    ranges_by_topic: dict[str, dict[int, PartitionRange]] = field(default_factory=dict)

    def audit(
        self,
        sinks: Iterable[Sink],
        context: Mapping[str, object] | None = None,
        dead_lettered_ids: Iterable[str] = (),
        dead_letter_unreadable: Iterable[Unreadable] = (),
    ) -> AuditReport:
        """Audit ``sinks`` against the events read from the input topics."""
        return audit(
            self.events,
            sinks,
            aborted_input_ids=self.aborted_ids,
            input_unreadable=[*self.unreadable, *dead_letter_unreadable],
            input_aborted_visible=self.aborted_visible,
            dead_lettered_ids=dead_lettered_ids,
            context=context,
        )


def read_input(
    bootstrap: Cluster, topics: str | Sequence[str], extractor: Extractor, timeout: float = 60.0
) -> InputRead:
    """The events of one or several input topics (each event knows its topic)."""
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise SourceError("no input topic")
    reads = [_read_one_input(bootstrap, name, extractor, timeout) for name in names]
    if len(reads) == 1:
        return reads[0]
    return InputRead(
        events=[event for read in reads for event in read.events],
        aborted_ids=set().union(*(read.aborted_ids for read in reads)),
        unreadable=[u for read in reads for u in read.unreadable],
        aborted_visible=[event for read in reads for event in read.aborted_visible],
        ranges={},
        ranges_by_topic={name: read.ranges for name, read in zip(names, reads, strict=True)},
    )


def _read_one_input(
    bootstrap: Cluster, topic: str, extractor: Extractor, timeout: float
) -> InputRead:
    ranges = topic_ranges(bootstrap, topic)
    outcomes = transaction_outcomes(bootstrap, topic, ranges)
    events, unreadable, visible_aborted = [], [], []
    missing_field = 0
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            event_id, key = extractor.message(record.key, record.value)
        except ExtractError as error:
            missing_field += isinstance(error, FieldMissing)
            unreadable.append(Unreadable("input", str(error), record.partition, record.offset))
            continue
        event = InputEvent(event_id, key, record.partition, record.offset, topic)
        if outcomes[record.partition].is_aborted(record.offset):
            visible_aborted.append(event)
        else:
            events.append(event)
    if unreadable and missing_field == len(unreadable) and not events and not visible_aborted:
        raise SourceError(
            f"topic {topic!r}: {unreadable[0].reason} in any of its {len(unreadable)} records: "
            "is --id-field (or --key-field) spelled right?"
        )
    aborted_ids = {event.id for event in visible_aborted}
    if any(o.aborted for o in outcomes.values()):
        for record in read_topic(bootstrap, topic, ranges, READ_UNCOMMITTED, timeout):
            if outcomes[record.partition].is_aborted(record.offset):
                try:
                    aborted_ids.add(extractor.message(record.key, record.value)[0])
                except ExtractError:
                    continue
    return InputRead(events, aborted_ids, unreadable, visible_aborted, ranges, {topic: ranges})


def read_dead_letters(
    bootstrap: Cluster, topic: str, extractor: Extractor, timeout: float = 60.0
) -> tuple[set[str], list[Unreadable]]:
    """Event ids in a dead-letter topic (records carry the input's key and value)."""
    ranges = topic_ranges(bootstrap, topic)
    ids, unreadable = set(), []
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            ids.add(extractor.message(record.key, record.value)[0])
        except ExtractError as error:
            unreadable.append(
                Unreadable(f"dlq:{topic}", str(error), record.partition, record.offset)
            )
    return ids, unreadable


def read_output_topic(
    bootstrap: Cluster,
    topic: str,
    extractor: Extractor,
    *,
    abort_marker: str | None = None,
    check_order: bool = True,
    timeout: float = 60.0,
) -> Sink:
    """The read_committed view of an output topic; aborted records are flagged."""
    ranges = topic_ranges(bootstrap, topic)
    outcomes = transaction_outcomes(bootstrap, topic, ranges)
    marker = FieldSpec.parse(abort_marker) if abort_marker else None
    sink = Sink(f"topic:{topic}", check_order=check_order)
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            event_id, key = extractor.message(record.key, record.value)
        except ExtractError as error:
            sink.unreadable.append(
                Unreadable(sink.name, str(error), record.partition, record.offset)
            )
            continue
        aborted = outcomes[record.partition].is_aborted(record.offset) or (
            marker is not None and extractor.flag(marker, record.key, record.value)
        )
        sink.records.append(OutputRecord(event_id, key, record.offset, record.partition, aborted))
    return sink


def _quote_identifier(name: str) -> str:
    return ".".join(quote_identifier(part) for part in name.split("."))


def _connect(url: str) -> tuple[Any, str]:
    """(DB-API connection whose cursors yield dict rows, dialect) for a database URL."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path or path == ":memory:":
            raise SourceError("an in-memory SQLite database cannot be audited")
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        return connection, "sqlite"
    scheme, _, rest = url.partition("://")
    if scheme.split("+")[0] in ("postgresql", "postgres"):
        import psycopg
        from psycopg.rows import dict_row

        return psycopg.connect(f"postgresql://{rest}", row_factory=dict_row), "postgresql"
    raise SourceError(f"unsupported database URL {url!r} (sqlite:///PATH or postgresql://...)")


def _rows(url: str, table: str | None, query: str | None, order_by: str | None) -> Iterator[dict]:
    connection, dialect = _connect(url)
    try:
        statements = []
        if query:
            statements.append(query)
        else:
            assert table is not None
            base = f"SELECT * FROM {_quote_identifier(table)}"
            if order_by:
                statements.append(f"{base} ORDER BY {_quote_identifier(order_by)}")
            elif dialect == "sqlite":  # insertion order for rowid tables
                statements += [f"{base} ORDER BY rowid", base]
            else:
                statements.append(base)
        for position, statement in enumerate(statements):
            try:
                cursor = connection.execute(statement)
            except sqlite3.OperationalError:
                if position + 1 < len(statements):
                    continue
                raise
            for row in cursor:
                yield dict(row)
            return
    except (sqlite3.Error, _psycopg_error()) as error:
        raise SourceError(f"{url}: {error}") from None
    finally:
        connection.close()


def _psycopg_error() -> type[BaseException]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is optional
        return sqlite3.Error
    return psycopg.Error


def read_table(
    url: str,
    extractor: Extractor,
    *,
    table: str | None = None,
    query: str | None = None,
    order_by: str | None = None,
    check_order: bool | None = None,
) -> Sink:
    """Rows of a table (or a query's result) as a sink, positions in row order.

    Order is only checked when it is defined: a query (which should ORDER BY), an
    explicit ``order_by`` column, or a SQLite table (rowid order). Pass ``check_order`` to
    override.
    """
    if (table is None) == (query is None):
        raise SourceError("give exactly one of a table or a query")
    if check_order is None:
        check_order = bool(query or order_by or url.startswith("sqlite:"))
    sink = Sink(f"table:{table}" if table else "query", check_order=check_order)
    for position, row in enumerate(_rows(url, table, query, order_by)):
        try:
            event_id, key = extractor.row(row)
        except ExtractError as error:
            sink.unreadable.append(Unreadable(sink.name, str(error), None, position))
            continue
        sink.records.append(OutputRecord(event_id, key, position, None, False))
    return sink
