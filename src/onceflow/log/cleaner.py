"""Log compaction for ``cleanup.policy=compact`` topics, at batch granularity.

Kafka's cleaner rewrites batches record by record. onceflow drops whole batches instead:
a batch in a closed segment is removed when every record in it has a newer record with the
same key further on in the log (and tombstones older than ``delete.retention.ms`` are
superseded by nothing). Batches are never re-encoded, so timestamps, compression and CRCs
stay as the producer wrote them. Transactional and control batches are kept: they carry
the producer and transaction state that recovery replays. Offsets never change; a cleaned
segment keeps its base offset even when its first batch is gone, as in Kafka.

A segment is rewritten into ``<base>.cleaned`` and renamed over the original, so a crash
leaves either the old or the new file, never a mix.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from onceflow.log.batch import ATTR_COMPRESSION_MASK, BatchHeader, read_key_values
from onceflow.log.durability import sync_directory, sync_file
from onceflow.log.partition_log import PartitionLog
from onceflow.log.segment import COMPACTED_MARKER, LogSegment, SegmentDamaged
from onceflow.protocol.errors import KafkaError

log = logging.getLogger(__name__)


def _keys_of(header: BatchHeader, data: bytes) -> list[bytes | None] | None:
    """Keys of an uncompressed batch's records; None when it cannot be compacted."""
    if header.is_transactional or header.is_control:
        return None
    if header.attributes & ATTR_COMPRESSION_MASK:
        return None
    header.position = 0
    return [record.key for record in read_key_values(data, header)]


def _latest_offsets(partition: PartitionLog, end: int) -> dict[bytes, int]:
    """Offset of the newest record for each key, over the log below ``end``."""
    latest: dict[bytes, int] = {}
    for header, data in partition.iter_batches():
        if header.last_offset >= end:
            break
        keys = _keys_of(header, data)
        if keys is None:
            continue
        for delta, key in enumerate(keys):
            if key is not None:
                latest[key] = header.base_offset + delta
    return latest


def compact(partition: PartitionLog) -> int:
    """Compact the closed segments of one partition; return the bytes removed. An
    offline partition is left as it is; damage found on the way takes it offline.

    Only durable records count (below the synced offset, as Kafka cleans below its first
    uncleanable offset): a record a power loss could still take back neither supersedes
    another nor is rewritten, and a segment rolled but not fsynced yet stays as it is."""
    if partition.offline or len(partition.segments) < 2:
        return 0
    removed = 0
    durable_end = partition.durability.synced.offset
    try:
        latest = _latest_offsets(partition, durable_end)
        for index, segment in enumerate(partition.segments[:-1]):
            if segment.next_offset > durable_end:
                break
            removed += _clean_segment(partition, index, segment, latest)
    except SegmentDamaged as damage:
        partition.status.found_damage(damage, "the cleaner's read")
    except KafkaError:
        if not partition.offline:  # else the replay found damage and took it offline
            raise
    return removed


def _clean_segment(
    partition: PartitionLog, index: int, segment: LogSegment, latest: dict[bytes, int]
) -> int:
    kept: list[bytes] = []
    dropped = 0
    for header in list(segment.headers_from(segment.base_offset)):
        data = segment.read(header.position, header.size)
        keys = _keys_of(header, data)
        superseded = keys is not None and all(
            key is not None and latest.get(key, -1) > header.base_offset + delta
            for delta, key in enumerate(keys)
        )
        if superseded:
            dropped += len(data)
        else:
            kept.append(data)
    if not dropped:
        return 0
    mark_compacted(segment.directory)
    cleaned_path = segment.log_path.with_suffix(".cleaned")
    with open(cleaned_path, "wb") as handle:
        for data in kept:
            handle.write(data)
        handle.flush()
        sync_file(handle.fileno())
    segment.close()
    os.replace(cleaned_path, segment.log_path)
    sync_directory(segment.directory)
    replacement = LogSegment(
        segment.directory, segment.base_offset, segment.index_interval_bytes, gaps_allowed=True
    )
    replacement.load(replacement.scan(crc_from_offset=None))
    replacement.next_offset = max(replacement.next_offset, segment.next_offset)
    partition.segments[index] = replacement
    log.info(
        "compacted %s-%d segment %d: %d bytes removed",
        partition.topic,
        partition.partition,
        segment.base_offset,
        dropped,
    )
    return dropped


def mark_compacted(directory: Path) -> None:
    """Record, durably and before any batch goes, that the log may have offset gaps."""
    marker = directory / COMPACTED_MARKER
    if marker.exists():
        return
    with open(marker, "wb") as handle:
        sync_file(handle.fileno())
    sync_directory(directory)


def compact_due(partitions: list[PartitionLog], now_ms: int | None = None) -> int:
    """Compact every partition of a compacted topic that has closed segments."""
    del now_ms  # dirty-ratio scheduling is a refinement; every closed segment is eligible
    started = time.monotonic()
    removed = sum(compact(partition) for partition in partitions if partition.config.compacted)
    if removed:
        log.info("compaction removed %d bytes in %.2fs", removed, time.monotonic() - started)
    return removed
