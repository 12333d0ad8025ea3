"""A partition's segments in offset order, its log start offset and its checkpoint file.

``partition.json`` holds the log start offset and the offset ranges a repair skipped on
purpose (``skipped_offsets``); it is replaced atomically, so a crash leaves the old or the
new one.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path

from onceflow.config import TopicConfig
from onceflow.log.durability import write_atomically
from onceflow.log.durable_offsets import SyncPoint
from onceflow.log.segment import LogSegment, gaps_allowed
from onceflow.log.tail_recovery import CHECKPOINT_FILE, read_known_gaps


def base_offset(segment: LogSegment) -> int:
    return segment.base_offset


class SegmentList:
    def __init__(self, directory: Path, config: TopicConfig) -> None:
        self.directory = directory
        self.config = config
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def gaps_allowed(self) -> bool:
        """Compaction may have removed batches: offsets need only increase."""
        return gaps_allowed(self.directory, self.config)

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def index_for(self, offset: int) -> int:
        """The index of the segment holding ``offset`` (the first one for an offset
        before them all)."""
        return max(bisect.bisect_right(self.segments, offset, key=base_offset) - 1, 0)

    def segment_for(self, offset: int) -> LogSegment:
        return self.segments[self.index_for(offset)]

    def open_files(self) -> None:
        """Open the segment files in the directory (one empty segment at the checkpoint's
        log start offset when there is none); their content is loaded by recovery."""
        bases = sorted(int(path.stem) for path in self.directory.glob("*.log"))
        if not bases:
            bases = [self.read_checkpoint().get("log_start_offset", 0)]
        self.segments = [self._segment(base) for base in bases]

    def add_segment(self, base: int, name_durable: bool = True) -> LogSegment:
        """Create the next segment, starting at ``base``. ``name_durable``: fsync the
        directory for its name now (otherwise the next fsync of the partition does)."""
        segment = self._segment(base, name_durable)
        if self.segments:  # the active one until now: its index files are complete
            self.segments[-1].flush_index_files()
        self.segments.append(segment)
        return segment

    def _segment(self, base: int, name_durable: bool = True) -> LogSegment:
        return LogSegment(
            self.directory,
            base,
            self.config["index.interval.bytes"],
            gaps_allowed=self.gaps_allowed,
            name_durable=name_durable,
        )

    def cut_back(self, point: SyncPoint) -> None:
        """Drop everything after ``point``: later segments, and the tail of its own."""
        keep = bisect.bisect_right(self.segments, point.segment_base, key=base_offset)
        for segment in self.segments[keep:]:
            segment.delete()
        del self.segments[keep:]
        self.active.cut_back(point.size)

    def delete_oldest(self) -> None:
        """Delete the oldest segment; the log then starts at the next one at the latest."""
        self.segments.pop(0).delete()
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.write_checkpoint()

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    # -- partition.json -------------------------------------------------------------------

    def read_checkpoint(self) -> dict:
        try:
            return json.loads((self.directory / CHECKPOINT_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def write_checkpoint(
        self, log_start_offset: int | None = None, skipped: list[list[int]] | None = None
    ) -> None:
        start = self.log_start_offset if log_start_offset is None else log_start_offset
        checkpoint: dict = {"log_start_offset": start}
        known = sorted(read_known_gaps(self.directory)) if skipped is None else skipped
        if known:
            checkpoint["skipped_offsets"] = [list(gap) for gap in known]
        write_atomically(self.directory / CHECKPOINT_FILE, json.dumps(checkpoint).encode())
