"""What recovery cuts, described and kept: quarantine copies and cut reports.

Nothing is ever cut from a log without a copy: the bytes go to
``<data-dir>/quarantine/<topic>-<partition>/`` first, named after the first offset they
held and the time of the cut, so an operator can inspect them with ``onceflow log dump``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from onceflow.log.batch import HEADER_SIZE, parse_header, stored_header_problem
from onceflow.log.durability import sync_directory, sync_file

QUARANTINE_DIR = "quarantine"
COPY_CHUNK_BYTES = 1 << 20


@dataclass(slots=True)
class CutRegion:
    """The batches that still parse in bytes about to be cut (CRCs are not trusted)."""

    bytes: int = 0
    batches: int = 0
    records: int = 0
    first_offset: int = -1
    last_offset: int = -1

    def add(self, other: CutRegion) -> None:
        self.bytes += other.bytes
        self.batches += other.batches
        self.records += other.records
        if self.first_offset < 0:
            self.first_offset = other.first_offset
        if other.last_offset >= 0:
            self.last_offset = other.last_offset

    def describe(self) -> str:
        if not self.batches:
            return f"{self.bytes} bytes, the first batch there unreadable"
        return (
            f"offsets {self.first_offset}-{self.last_offset} as far as readable "
            f"({self.records} records in {self.batches} batches), {self.bytes} bytes"
        )


def describe_region(
    path: Path, start: int, end: int, first_offset: int, gaps_allowed: bool
) -> CutRegion:
    """Walk the batch headers in ``path[start:end]`` as far as they hold together (the
    first batch starting at ``first_offset``, each next where the one before ends)."""
    region = CutRegion(bytes=end - start)
    expected = first_offset
    with open(path, "rb") as handle:
        position = start
        while position + HEADER_SIZE <= end:
            handle.seek(position)
            header = parse_header(handle.read(HEADER_SIZE))
            if stored_header_problem(header, expected, gaps_allowed) is not None:
                break
            if position + header.size > end:
                break
            region.batches += 1
            region.records += header.records_count
            if region.first_offset < 0:
                region.first_offset = header.base_offset
            region.last_offset = header.last_offset
            expected = header.next_offset
            position += header.size
    return region


def quarantine_copy(quarantine: Path, name: str, source: Path, start: int) -> Path:
    """Copy ``source[start:]`` durably into ``quarantine/name/``; return the copy."""
    directory = quarantine / name
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if created:
        sync_directory(quarantine)
        sync_directory(quarantine.parent)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = directory / f"{source.stem}-from-byte-{start}-{stamp}{source.suffix}"
    with open(source, "rb") as reader, open(target, "wb") as writer:
        reader.seek(start)
        while chunk := reader.read(COPY_CHUNK_BYTES):
            writer.write(chunk)
        writer.flush()
        sync_file(writer.fileno())
    sync_directory(directory)
    return target
