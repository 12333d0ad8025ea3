"""The message browser: a partition's records from an offset (or a timestamp), with what
a consumer never shows: the control records (commit and abort markers), and which
transactional records were aborted, committed, or are still open.

Records are fetched raw from the partition's leader (Fetch v12 through ``WireClient``,
with the console's security settings), so the broker's own bytes are shown: under
``read_committed`` the fetch stops at the LSO and names the aborted transactions, under
``read_uncommitted`` it reaches the high watermark and a transactional batch's fate is
read from the marker that follows it. Uncompressed and gzip batches are decoded; a batch
of another codec is listed without its records.
"""

from __future__ import annotations

import datetime
import gzip
import zlib
from dataclasses import dataclass, field, replace

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import NotFound, Refused
from onceflow.admin.groups import log_offsets
from onceflow.admin.transactions import cluster
from onceflow.log.batch import ATTR_COMPRESSION_MASK, HEADER_SIZE, control_type_of, iter_headers
from onceflow.log.dump_segment import (
    COMPRESSION_CODECS,
    CONTROL_TYPES,
    StoredBatch,
    record_timestamp,
)

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
FETCH_BYTES = 1 << 20
MAX_RECORDS = 200


@dataclass(frozen=True, slots=True)
class Shown:
    offset: int
    timestamp_ms: int
    key: str | None
    value: str | None
    headers: list[tuple[str, str | None]]
    producer_id: int
    kind: str  # "record", "control"
    status: str  # "plain", "committed", "aborted", "open", "commit marker", "abort marker"


@dataclass(frozen=True, slots=True)
class Page:
    topic: str
    partition: int
    isolation: str
    start: int
    records: list[Shown] = field(default_factory=list)
    next_offset: int | None = None
    high_watermark: int | None = None
    stable: int | None = None
    log_start: int | None = None
    skipped: list[str] = field(default_factory=list)  # batches not decoded, and why


def offset_for(session: ClusterSession, topic: str, partition: int, timestamp_ms: int) -> int:
    """The first offset whose timestamp is at least ``timestamp_ms`` (ListOffsets)."""
    from confluent_kafka.admin import OffsetSpec

    found = log_offsets(session, [(topic, partition)], OffsetSpec.for_timestamp(timestamp_ms))
    offset = found.get((topic, partition), -1)
    if offset < 0:  # none that late: the end
        offset = log_offsets(session, [(topic, partition)])[(topic, partition)]
    return offset


def browse(
    session: ClusterSession,
    topic: str,
    partition: int,
    offset: int | None,
    isolation: str,
    limit: int = 50,
) -> Page:
    """Up to ``limit`` records of ``topic:partition`` from ``offset`` (None: the log start)."""
    from kio.schema.fetch.v12 import request as fetch
    from kio.static.primitive import i8, i32, i64

    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise Refused(f"isolation must be {READ_COMMITTED} or {READ_UNCOMMITTED}")
    if limit < 1 or limit > MAX_RECORDS:
        raise Refused(f"show between 1 and {MAX_RECORDS} records")
    view = cluster(session, topic)
    leader = view.leaders.get((topic, partition))
    if leader is None:
        raise NotFound(f"partition {topic}:{partition} does not exist")
    if leader not in view.brokers:
        raise Refused(f"partition {topic}:{partition} has no leader now")
    if offset is not None and offset < 0:
        raise Refused(f"offset {offset} is negative")
    committed = isolation == READ_COMMITTED
    wanted = fetch.FetchPartition(
        partition=i32(partition),
        fetch_offset=i64(offset or 0),
        partition_max_bytes=i32(FETCH_BYTES),
    )
    with session.wire(view.brokers[leader]) as client:
        if offset is None:
            offset = _log_start(session, topic, partition)
            wanted = fetch.FetchPartition(
                partition=i32(partition),
                fetch_offset=i64(offset),
                partition_max_bytes=i32(FETCH_BYTES),
            )
        response = client.request(
            fetch.FetchRequest,
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=i32(1),
            isolation_level=i8(1 if committed else 0),
            topics=(fetch.FetchTopic(topic=topic, partitions=(wanted,)),),
            forgotten_topics_data=(),
        )
    (answer,) = response.responses[0].partitions
    if answer.error_code:
        from onceflow.protocol.errors import ErrorCode

        name = ErrorCode(answer.error_code).name.upper()
        if name == "OFFSET_OUT_OF_RANGE":
            raise Refused(
                f"offset {offset} is outside {topic}:{partition} (log start "
                f"{answer.log_start_offset}, end {answer.high_watermark})"
            )
        raise Refused(f"fetching {topic}:{partition} answered {name}")
    aborted = {int(a.producer_id): int(a.first_offset) for a in answer.aborted_transactions or ()}
    records, skipped = _decode(bytes(answer.records or b""), offset, limit, aborted, committed)
    next_offset = records[-1].offset + 1 if records else None
    return Page(
        topic,
        partition,
        isolation,
        offset,
        records,
        next_offset,
        int(answer.high_watermark),
        int(answer.last_stable_offset),
        int(answer.log_start_offset),
        skipped,
    )


def _log_start(session: ClusterSession, topic: str, partition: int) -> int:
    from confluent_kafka.admin import OffsetSpec

    return log_offsets(session, [(topic, partition)], OffsetSpec.earliest())[(topic, partition)]


def _decode(
    data: bytes, start: int, limit: int, aborted: dict[int, int], read_committed: bool
) -> tuple[list[Shown], list[str]]:
    headers = list(iter_headers(data))
    fates = _fates(data, headers, aborted, read_committed)
    shown: list[Shown] = []
    skipped: list[str] = []
    for header in headers:
        if len(shown) >= limit:
            break
        if header.is_control:
            if header.last_offset >= start:
                kind = CONTROL_TYPES.get(control_type_of(data, header), "?")
                shown.append(
                    Shown(
                        header.base_offset,
                        header.max_timestamp,
                        None,
                        None,
                        [],
                        header.producer_id,
                        "control",
                        f"{kind.lower()} marker",
                    )
                )
            continue
        codec = header.attributes & ATTR_COMPRESSION_MASK
        if codec not in (0, 1):
            skipped.append(
                f"offsets {header.base_offset}-{header.last_offset}: "
                f"{COMPRESSION_CODECS.get(codec, codec)} batch, records not shown"
            )
            continue
        status = fates.get(header.position, "plain")
        batch = _plain(
            StoredBatch(header, data[header.position : header.position + header.size], True)
        )
        for record in _records(batch):
            if record.offset < start:
                continue
            if len(shown) >= limit:
                break
            shown.append(replace(record, status=status))
    return shown, skipped


def _records(batch: StoredBatch) -> list[Shown]:
    from kio.records.readers import read_record

    header = batch.header
    if not batch.valid:
        return []
    position, records = HEADER_SIZE, []
    for _ in range(header.records_count):
        record, size = read_record(batch.data, header.base_timestamp, header.base_offset, position)
        items = [(_text(h.key) or "", _text(h.value)) for h in record.headers]
        records.append(
            Shown(
                record.offset,
                record_timestamp(batch, position),
                _text(record.key),
                _text(record.value),
                items,
                header.producer_id,
                "record",
                "plain",
            )
        )
        position += size
    return records


def _fates(
    data: bytes, headers: list, aborted: dict[int, int], read_committed: bool
) -> dict[int, str]:
    """Batch position -> committed, aborted or open, for every transactional batch: from
    the fetch's aborted list under read_committed (everything before the LSO is decided),
    else from the next marker of the same producer."""
    fates: dict[int, str] = {}
    pending: dict[int, list[int]] = {}  # producer -> positions waiting for their marker
    for header in headers:
        if not header.is_transactional:
            continue
        producer = header.producer_id
        if header.is_control:
            kind = control_type_of(data, header)
            for position in pending.pop(producer, []):
                fates[position] = "committed" if CONTROL_TYPES.get(kind) == "COMMIT" else "aborted"
            continue
        if read_committed:
            first = aborted.get(producer)
            fates[header.position] = (
                "aborted" if first is not None and header.base_offset >= first else "committed"
            )
        pending.setdefault(producer, []).append(header.position)
    for positions in pending.values():
        for position in positions:
            fates.setdefault(position, "open")
    return fates


def _plain(batch: StoredBatch) -> StoredBatch:
    """The batch with its records uncompressed (gzip), for read_records."""
    header = batch.header
    if not header.attributes & ATTR_COMPRESSION_MASK:
        return batch
    try:
        body = gzip.decompress(batch.data[HEADER_SIZE:])
    except (OSError, EOFError, zlib.error):
        return StoredBatch(header, batch.data[:HEADER_SIZE], False)
    return StoredBatch(header, batch.data[:HEADER_SIZE] + body, True)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")
