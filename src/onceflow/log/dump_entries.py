"""``onceflow log dump`` of a partition's other files: the offset and time indexes, the
transaction index, producer-state snapshots and ``partition.json``."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from onceflow.log.dump_lines import (
    RECORD_INDENT,
    DumpLine,
    DumpOptions,
    base_offset_of,
    read_file,
)
from onceflow.log.segment import OFFSET_ENTRY, TIME_ENTRY
from onceflow.log.txn_index import TXN_ENTRY

# -- indexes ----------------------------------------------------------------------------


def fixed_entries(data: bytes, entry: struct.Struct) -> Iterator[tuple]:
    usable = len(data) - len(data) % entry.size
    for position in range(0, usable, entry.size):
        yield entry.unpack_from(data, position)


def partial_entry_line(data: bytes, entry: struct.Struct, path: Path) -> Iterator[DumpLine]:
    leftover = len(data) % entry.size
    if leftover:
        yield DumpLine(
            f"Found {leftover} invalid bytes at the end of {path.name}: "
            f"a partial {entry.size}-byte entry at position {len(data) - leftover}",
            problem=True,
        )


def dump_index(
    path: Path, entry: struct.Struct, relative_at: int, describe: Callable[[int, tuple], str]
) -> Iterator[DumpLine]:
    """``describe(base_offset, entry)`` per entry of an offset or time index, whose relative
    offset is field ``relative_at``."""
    data = read_file(path)
    base_offset = base_offset_of(path) or 0
    if not data:
        yield DumpLine(f"{path} is empty.")
    for number, values in enumerate(fixed_entries(data, entry)):
        if number > 0 and values[relative_at] == 0:
            break  # zeroed space after the last entry (a preallocated index), as in Kafka
        yield DumpLine(describe(base_offset, values))
    yield from partial_entry_line(data, entry, path)


def dump_offset_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """``offset: N position: N`` per entry, offsets made absolute as Kafka prints them."""
    yield from dump_index(
        path, OFFSET_ENTRY, 0, lambda base, e: f"offset: {base + e[0]} position: {e[1]}"
    )


def dump_time_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """``timestamp: N offset: N`` per entry."""
    yield from dump_index(
        path, TIME_ENTRY, 1, lambda base, e: f"timestamp: {e[0]} offset: {base + e[1]}"
    )


def dump_txn_index(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """The aborted transactions recorded for a segment."""
    data = read_file(path)
    if not data:
        yield DumpLine(f"{path} is empty.")
    for version, producer_id, first, last, stable in fixed_entries(data, TXN_ENTRY):
        yield DumpLine(
            f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {stable}"
        )
    yield from partial_entry_line(data, TXN_ENTRY, path)


# -- producer state and the partition checkpoint ----------------------------------------


def dump_producer_snapshot(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    """A producer-state snapshot, read directly (ProducerStateManager deletes bad ones).

    One line per producer in Kafka's wording with its newest batch, then a ``|`` line per
    batch onceflow remembers for duplicate detection.
    """
    try:
        state = json.loads(read_file(path))
        producers = state["producers"]
        yield DumpLine(f"Producer state snapshot at offset {state['offset']}")
        for producer in producers:
            yield from producer_lines(producer)
    except (ValueError, KeyError, TypeError) as error:
        yield DumpLine(f"{path.name} is not a readable producer snapshot: {error!r}", problem=True)


def producer_lines(producer: dict) -> Iterator[DumpLine]:
    batches = producer["batches"]
    text = (
        f"producerId: {producer['producer_id']} producerEpoch: {producer['epoch']} "
        f"coordinatorEpoch: {producer['coordinator_epoch']} "
        f"currentTxnFirstOffset: {producer['txn_first_offset']} "
        f"lastTimestamp: {producer['last_timestamp']}"
    )
    if batches:
        first_seq, last_seq, first_offset, last_offset, timestamp = batches[-1]
        text += (
            f" firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} "
            f"offsetDelta: {last_offset - first_offset} timestamp: {timestamp}"
        )
    yield DumpLine(text)
    for first_seq, last_seq, first_offset, last_offset, timestamp in batches:
        yield DumpLine(
            f"{RECORD_INDENT} firstSequence: {first_seq} lastSequence: {last_seq} "
            f"firstOffset: {first_offset} lastOffset: {last_offset} timestamp: {timestamp}"
        )


def dump_partition_checkpoint(path: Path, _options: DumpOptions) -> Iterator[DumpLine]:
    try:
        checkpoint = json.loads(read_file(path))
        yield DumpLine(f"logStartOffset: {checkpoint['log_start_offset']}")
        for end, base in checkpoint.get("skipped_offsets", []):
            yield DumpLine(f"skippedOffsets: {end}-{base - 1} (cut by a repair, never reused)")
    except (ValueError, KeyError, TypeError) as error:
        yield DumpLine(f"{path.name} is not a readable checkpoint: {error!r}", problem=True)
