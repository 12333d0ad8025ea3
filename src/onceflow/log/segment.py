"""One log segment: ``<base:020d>.log`` with its sparse offset and time indexes.

Index files use Kafka's layouts: ``.index`` holds (relative offset int32, position int32)
entries, ``.timeindex`` holds (timestamp int64, relative offset int32) entries. Both are
sparse (one entry per ``index.interval.bytes``) and are rebuilt from the log when missing
or when the segment is recovered after an unclean shutdown.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from onceflow.log.batch import HEADER_SIZE, BatchHeader, Bytes, check_crc, parse_header

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
SCAN_CHUNK_BYTES = 64 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_suffix(".log")
        self.index_path = stem.with_suffix(".index")
        self.time_index_path = stem.with_suffix(".timeindex")
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.created_ms: int | None = None
        self._index_offsets: list[int] = []  # absolute offsets
        self._index_positions: list[int] = []
        self._time_stamps: list[int] = []
        self._time_offsets: list[int] = []
        self._bytes_since_entry = index_interval_bytes  # the first batch is always indexed
        self._index_fd = -1
        self._time_index_fd = -1
        self._open_index_files()

    # -- loading -------------------------------------------------------------------------

    def load(self, validate: bool) -> list[BatchHeader]:
        """Scan the segment, drop a torn or corrupt tail, rebuild indexes.

        Returns the headers of every batch (callers replay producer state from them).
        With ``validate`` false and intact index files, the scan trusts the data.
        """
        headers: list[BatchHeader] = []
        valid_end = 0
        for header in self._scan(0, validate):
            headers.append(header)
            valid_end = header.position + header.size
        if valid_end < self.size:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        self._rebuild_indexes(headers)
        return headers

    def _scan(self, position: int, validate: bool) -> Iterator[BatchHeader]:
        chunk = b""
        chunk_start = position
        expected_offset = self.base_offset  # offsets only grow (compaction leaves gaps)
        while position + HEADER_SIZE <= self.size:
            relative = position - chunk_start
            if relative + HEADER_SIZE > len(chunk):
                chunk = os.pread(self.fd, SCAN_CHUNK_BYTES, position)
                chunk_start, relative = position, 0
                if len(chunk) < HEADER_SIZE:
                    return
            header = parse_header(chunk, relative)
            if header.magic != 2 or header.length < HEADER_SIZE - 12:
                return
            if position + header.size > self.size:
                return
            if validate:
                # A stale but intact batch (old bytes past the real end) is torn too:
                # accepting it would move the log end offset backwards.
                if header.base_offset < expected_offset or header.last_offset_delta < 0:
                    return
                expected_offset = header.next_offset
                if relative + header.size <= len(chunk):
                    intact = check_crc(chunk, header)
                else:
                    data = os.pread(self.fd, header.size, position)
                    intact = check_crc(data, parse_header(data))
                if not intact:
                    return
            header.position = position
            yield header
            position += header.size

    def _rebuild_indexes(self, headers: list[BatchHeader]) -> None:
        self._index_offsets.clear()
        self._index_positions.clear()
        self._time_stamps.clear()
        self._time_offsets.clear()
        self._bytes_since_entry = self.index_interval_bytes  # first batch always indexed
        self.max_timestamp = -1
        self.next_offset = self.base_offset
        self._close_index_files()
        for path in (self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        self._open_index_files()
        for header in headers:
            self._track(header, header.position)
        if headers:
            self.created_ms = headers[0].max_timestamp

    def _open_index_files(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._index_fd = os.open(self.index_path, flags, 0o644)
        self._time_index_fd = os.open(self.time_index_path, flags, 0o644)

    def _close_index_files(self) -> None:
        for fd in (self._index_fd, self._time_index_fd):
            if fd >= 0:
                os.close(fd)
        self._index_fd = self._time_index_fd = -1

    # -- appending -----------------------------------------------------------------------

    def append(self, data: Bytes, header: BatchHeader) -> None:
        self.append_parts((data,), header)

    def append_parts(self, parts: Sequence[Bytes], header: BatchHeader) -> None:
        """Append one batch given as consecutive parts (one writev, no joining copy)."""
        position = self.size
        written = os.writev(self.fd, parts) if len(parts) > 1 else os.write(self.fd, parts[0])
        if written != header.size:
            raise OSError(f"short write to {self.log_path}: {written} of {header.size} bytes")
        self.size += written
        self._track(header, position)

    def _track(self, header: BatchHeader, position: int) -> None:
        if self.created_ms is None:
            self.created_ms = header.max_timestamp
        self._bytes_since_entry += header.size
        if self._bytes_since_entry >= self.index_interval_bytes:
            self._bytes_since_entry = 0
            relative = header.base_offset - self.base_offset
            self._index_offsets.append(header.base_offset)
            self._index_positions.append(position)
            os.write(self._index_fd, OFFSET_ENTRY.pack(relative, position))
            if header.max_timestamp > self.max_timestamp:
                self._time_stamps.append(header.max_timestamp)
                self._time_offsets.append(header.base_offset)
                os.write(self._time_index_fd, TIME_ENTRY.pack(header.max_timestamp, relative))
        self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        self.next_offset = header.next_offset

    def flush(self) -> None:
        os.fdatasync(self.fd)

    # -- reading -------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches that end at or after ``offset``, in order."""
        index = bisect.bisect_right(self._index_offsets, offset) - 1
        position = self._index_positions[index] if index >= 0 else 0
        for header in self._scan(position, validate=False):
            if header.next_offset > offset:
                yield header

    def headers_for_timestamp(self, timestamp: int) -> Iterator[BatchHeader]:
        """Headers from a position at or before the first batch with max timestamp >= ts."""
        index = bisect.bisect_left(self._time_stamps, timestamp) - 1
        offset = self._time_offsets[index] if index >= 0 else self.base_offset
        yield from self.headers_from(offset)

    # -- lifecycle -----------------------------------------------------------------------

    def truncate_to(self, position: int, headers: list[BatchHeader]) -> None:
        os.ftruncate(self.fd, position)
        self.size = position
        self._rebuild_indexes([h for h in headers if h.position < position])

    def close(self) -> None:
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
