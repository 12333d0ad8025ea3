"""One log segment: ``<base:020d>.log`` with its sparse offset and time indexes.

Index files use Kafka's layouts: ``.index`` holds (relative offset int32, position int32)
entries, ``.timeindex`` holds (timestamp int64, relative offset int32) entries. Both are
sparse (one entry per ``index.interval.bytes``) and rebuilt from the log whenever the
segment is loaded, so they are written on a best-effort basis and never fsynced: entries
gather in memory and are appended a few KB at a time (and when the segment rolls, is
rebuilt or closed), each time by opening the file, so a partition holds one descriptor
(its active ``.log``), not three: 10,000 partitions fit in a 20,000-descriptor limit.

A failed append leaves no trace: the segment is cut back to its length before the append
(a write to a full disk may have written part of the batch).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.config import TopicConfig
from onceflow.log.batch import (
    HEADER_SIZE,
    MAX_RELATIVE_OFFSET,
    BatchHeader,
    Bytes,
    check_crc,
    parse_header,
    stored_header_problem,
)
from onceflow.log.durability import create_file, sync_file

log = logging.getLogger(__name__)

OFFSET_ENTRY = struct.Struct(">ii")
INDEX_WRITE_BYTES = 4096  # index entries gathered before they are appended to their file
TIME_ENTRY = struct.Struct(">qi")
SCAN_CHUNK_BYTES = 64 * 1024


# In a partition directory once the cleaner has removed batches from it: its offsets may
# have gaps even if the topic's cleanup.policy no longer says compact.
COMPACTED_MARKER = "compacted.marker"


def gaps_allowed(directory: Path, config: TopicConfig) -> bool:
    """Whether the batches of a partition's log may leave gaps between their offsets."""
    return config.compacted or (directory / COMPACTED_MARKER).exists()


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class CutBackFailed(OSError):
    """A failed append could not be removed from the segment: its tail is unknown."""


class SegmentDamaged(Exception):
    """A batch read from a loaded segment is no longer what was loaded (damage on disk)."""

    def __init__(self, problem: str, path: Path, position: int) -> None:
        super().__init__(f"{problem} ({path}, byte {position})")
        self.problem = problem
        self.path = path
        self.position = position


@dataclass(slots=True)
class SegmentScan:
    """What a scan of a segment found: its batches and where (and why) it stopped."""

    headers: list[BatchHeader] = field(default_factory=list)
    valid_end: int = 0  # byte position after the last good batch
    problem: str | None = None  # why the scan stopped before the end of the file
    reason: str | None = None  # the problem without its byte position
    problem_at: int = 0  # byte position of the problem
    end_offset: int = 0  # the offset after the last good batch (or where one must start)


@dataclass(frozen=True, slots=True)
class OffsetRules:
    """What a segment's batch offsets must satisfy beyond the batches' own consistency.

    ``gaps_allowed``: the log may have been compacted (offsets need only increase).
    ``limit``: every offset is below it (the next segment's base offset).
    ``previous_end``: the offset after the segment before this one, if any.
    """

    gaps_allowed: bool = False
    limit: int | None = None
    previous_end: int | None = None


NO_RULES = OffsetRules()


def scan_batches(
    fd: int,
    size: int,
    base_offset: int,
    position: int = 0,
    crc_from_offset: int | None = 0,
    result: SegmentScan | None = None,
    rules: OffsetRules = NO_RULES,
    expected_offset: int | None = None,
) -> Iterator[BatchHeader]:
    """Yield the sound batch headers of a segment file from ``position``.

    Every header is checked (magic, length, offsets against the batch before, record
    count, leader epoch, the segment's range: see ``stored_header_problem``); CRCs of
    the batches that end after ``crc_from_offset`` (None: none). ``expected_offset``: the
    offset the batch at ``position`` must start at (default: the segment's base offset).
    Says in ``result`` why it stopped early.
    """

    def stop(problem: str) -> None:
        if result is not None:
            result.problem = f"{problem} at byte {position}"
            result.reason = problem
            result.problem_at = position

    chunk = b""
    chunk_start = position
    expected = base_offset if expected_offset is None else expected_offset
    highest = base_offset + MAX_RELATIVE_OFFSET
    if rules.limit is not None:
        highest = min(highest, rules.limit - 1)
    while position + HEADER_SIZE <= size:
        relative = position - chunk_start
        if relative + HEADER_SIZE > len(chunk):
            chunk = os.pread(fd, SCAN_CHUNK_BYTES, position)
            chunk_start, relative = position, 0
            if len(chunk) < HEADER_SIZE:
                return stop("file shorter than its size")
        header = parse_header(chunk, relative)
        # A stale but intact batch (old bytes past the real end) fails the offset check:
        # accepting it would move the log end offset backwards.
        problem = stored_header_problem(header, expected, rules.gaps_allowed)
        if problem is not None:
            return stop(problem)
        if position + header.size > size:
            return stop(f"batch of {header.size} bytes running past the end of the file")
        if header.last_offset > highest:
            return stop(
                f"batch with offsets {header.base_offset}-{header.last_offset} outside its "
                f"segment (offsets {base_offset}-{highest})"
            )
        expected = header.next_offset
        if crc_from_offset is not None and header.next_offset > crc_from_offset:
            if relative + header.size <= len(chunk):
                intact = check_crc(chunk, header)
            else:
                data = os.pread(fd, header.size, position)
                intact = len(data) == header.size and check_crc(data, parse_header(data))
            if not intact:
                return stop(f"CRC mismatch in the batch at offset {header.base_offset}")
        header.position = position
        yield header
        position += header.size


def scan_file(
    fd: int,
    size: int,
    base_offset: int,
    crc_from_offset: int | None,
    rules: OffsetRules = NO_RULES,
) -> SegmentScan:
    """Every sound batch of a segment file from its start, and why the scan stopped."""
    result = SegmentScan(end_offset=base_offset)
    previous = rules.previous_end
    if previous is not None and (
        previous > base_offset or (previous < base_offset and not rules.gaps_allowed)
    ):
        result.end_offset = min(previous, base_offset)
        result.reason = f"segment {base_offset} follows a segment ending before offset {previous}"
        result.problem = f"{result.reason} at byte 0"
        return result
    for header in scan_batches(fd, size, base_offset, 0, crc_from_offset, result, rules):
        result.headers.append(header)
        result.valid_end = header.position + header.size
        result.end_offset = header.next_offset
    if result.problem is None and result.valid_end < size:
        result.reason = "incomplete batch at the end of the file"
        result.problem = f"{result.reason} at byte {result.valid_end}"
        result.problem_at = result.valid_end
    return result


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        *,
        gaps_allowed: bool = False,
        name_durable: bool = True,
    ) -> None:
        """``name_durable``: a new segment file's name is made durable now (otherwise the
        caller fsyncs the directory before it counts on the file)."""
        self.directory = directory
        self.base_offset = base_offset
        self.gaps_allowed = gaps_allowed  # compaction may leave gaps between batches
        self._read_rules = OffsetRules(gaps_allowed=gaps_allowed)
        self.index_interval_bytes = index_interval_bytes
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_suffix(".log")
        self.index_path = stem.with_suffix(".index")
        self.time_index_path = stem.with_suffix(".timeindex")
        self.fd = create_file(self.log_path, name_durable)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.created_ms: int | None = None
        self._index_offsets: list[int] = []  # absolute offsets
        self._index_positions: list[int] = []
        self._time_stamps: list[int] = []
        self._time_offsets: list[int] = []
        self._bytes_since_entry = index_interval_bytes  # the first batch is always indexed
        self._index_files_ok = True
        self._pending_index = bytearray()  # entries not yet in the .index file
        self._pending_time_index = bytearray()  # ... nor in the .timeindex file
        self._open_index_files()

    # -- loading -------------------------------------------------------------------------

    def scan(
        self, crc_from_offset: int | None = 0, rules: OffsetRules | None = None
    ) -> SegmentScan:
        """Read every batch header; stop at the first batch that is not sound.

        Every header is checked (see ``scan_batches``); CRCs only of batches that end
        after ``crc_from_offset`` (None: no CRC checks). The segment is not changed.
        """
        if rules is None:
            rules = self._read_rules
        return scan_file(self.fd, self.size, self.base_offset, crc_from_offset, rules)

    def load(self, scan: SegmentScan) -> None:
        """Take a scan's batches as the segment's content and rebuild the indexes."""
        self._rebuild_indexes(scan.headers)

    def _rebuild_indexes(self, headers: list[BatchHeader]) -> None:
        self._index_offsets.clear()
        self._index_positions.clear()
        self._time_stamps.clear()
        self._time_offsets.clear()
        self._bytes_since_entry = self.index_interval_bytes  # first batch always indexed
        self.max_timestamp = -1
        self.next_offset = self.base_offset
        self._pending_index.clear()
        self._pending_time_index.clear()
        for path in (self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        self._open_index_files()
        for header in headers:
            self._track(header, header.position)
        self.flush_index_files()
        if headers:
            self.created_ms = headers[0].max_timestamp

    def _open_index_files(self) -> None:
        """Create the index files (entries come later, see flush_index_files)."""
        self._index_files_ok = True
        for path in (self.index_path, self.time_index_path):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
            except OSError as error:
                self._index_files_failed(error)
                return

    def _write_index_entry(self, pending: bytearray, entry: bytes) -> None:
        if not self._index_files_ok:
            return
        pending += entry
        if len(pending) >= INDEX_WRITE_BYTES:
            self.flush_index_files()

    def flush_index_files(self) -> None:
        """Append the gathered entries to the index files."""
        if not self._index_files_ok:
            return
        for path, pending in (
            (self.index_path, self._pending_index),
            (self.time_index_path, self._pending_time_index),
        ):
            if not pending:
                continue
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    os.write(fd, pending)
                finally:
                    os.close(fd)
            except OSError as error:
                self._index_files_failed(error)
                return
            pending.clear()

    def _index_files_failed(self, error: OSError) -> None:
        """Index files are only a copy of the in-memory index: stop writing them."""
        log.warning(
            "not writing the index files of %s any more (%s); they are rebuilt at start-up",
            self.log_path,
            error,
        )
        self._close_index_files()

    def _close_index_files(self) -> None:
        self._index_files_ok = False
        self._pending_index.clear()
        self._pending_time_index.clear()

    # -- appending -----------------------------------------------------------------------

    def append(self, data: Bytes, header: BatchHeader) -> None:
        self.append_parts((data,), header)

    def append_parts(self, parts: Sequence[Bytes], header: BatchHeader) -> None:
        """Append one batch given as consecutive parts (one writev, no joining copy).

        On any error the segment is cut back to where the batch began, then the OSError
        is raised; CutBackFailed if even that fails.
        """
        position = self.size
        try:
            written = os.writev(self.fd, parts) if len(parts) > 1 else os.write(self.fd, parts[0])
            while written < header.size:  # a short write: the next one says why
                rest = b"".join(bytes(part) for part in parts)[written:]
                more = os.write(self.fd, rest)
                if more == 0:
                    raise OSError(errno.EIO, "write made no progress", str(self.log_path))
                written += more
        except OSError:
            self.cut_back(position)
            raise
        self.size += written
        self._track(header, position)

    def cut_back(self, position: int) -> None:
        """Truncate the file to ``position`` (the end of the last good batch)."""
        try:
            os.ftruncate(self.fd, position)
        except OSError as error:
            raise CutBackFailed(
                error.errno,
                f"cannot cut back to byte {position}: {error.strerror}",
                str(self.log_path),
            ) from error
        self.size = position

    def _track(self, header: BatchHeader, position: int) -> None:
        if self.created_ms is None:
            self.created_ms = header.max_timestamp
        self._bytes_since_entry += header.size
        if self._bytes_since_entry >= self.index_interval_bytes:
            self._bytes_since_entry = 0
            relative = header.base_offset - self.base_offset
            self._index_offsets.append(header.base_offset)
            self._index_positions.append(position)
            self._write_index_entry(self._pending_index, OFFSET_ENTRY.pack(relative, position))
            if header.max_timestamp > self.max_timestamp:
                self._time_stamps.append(header.max_timestamp)
                self._time_offsets.append(header.base_offset)
                self._write_index_entry(
                    self._pending_time_index, TIME_ENTRY.pack(header.max_timestamp, relative)
                )
        self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        self.next_offset = header.next_offset

    def flush(self) -> None:
        sync_file(self.fd)

    def sync_handle(self) -> int:
        """A descriptor of the segment file of its own, for an fsync off the event loop
        (the caller closes it)."""
        return os.dup(self.fd)

    # -- reading -------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    def headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches that end at or after ``offset``, in order.

        Raises SegmentDamaged when a batch on disk is no longer sound (the scan starts at
        an index entry, so the batch there must still start at that entry's offset).
        """
        index = bisect.bisect_right(self._index_offsets, offset) - 1
        position = self._index_positions[index] if index >= 0 else 0
        expected = self._index_offsets[index] if index >= 0 else self.base_offset
        scan = SegmentScan()
        for header in scan_batches(
            self.fd, self.size, self.base_offset, position, None, scan, self._read_rules, expected
        ):
            if header.next_offset > offset:
                yield header
        if scan.problem is not None:
            raise SegmentDamaged(scan.reason or scan.problem, self.log_path, scan.problem_at)

    def headers_for_timestamp(self, timestamp: int) -> Iterator[BatchHeader]:
        """Headers from a position at or before the first batch with max timestamp >= ts."""
        index = bisect.bisect_left(self._time_stamps, timestamp) - 1
        offset = self._time_offsets[index] if index >= 0 else self.base_offset
        yield from self.headers_from(offset)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        self.flush_index_files()
        self._close_index_files()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        self.directory.joinpath(segment_name(self.base_offset) + ".txnindex").unlink(
            missing_ok=True
        )
