"""``onceflow log check``: every segment of a stopped broker's data directory, checked.

Every batch's CRC-32C and every header check of start-up (``stored_header_problem``:
magic, length, offsets contiguous across batches and segments, record count, leader epoch)
are run (start-up checks CRCs only after the recovery point). A partition is reported as
one of:

- ``ok``: every batch is sound;
- ``torn tail``: damage after the recovery point, which start-up cuts by itself (with a
  quarantine copy);
- ``damaged``: damage below the recovery point (acknowledged data), or a log that ends
  before it: start-up keeps the partition offline until ``--repair``.

``repair`` cuts a damaged partition at its first bad batch, keeping the cut bytes in
``quarantine/``, and continues the log at its old recovery point (the skipped offsets are
recorded in ``partition.json``), so no acknowledged offset is handed out again. The
broker must be stopped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.config import BrokerConfig, TopicConfig, validate_topic_configs
from onceflow.log.manager import (
    RECOVERY_POINT_FILE,
    REGISTRY_FILE,
    read_recovery_points,
    write_recovery_point_file,
)
from onceflow.log.partition_log import PartitionLog
from onceflow.log.recovery import QUARANTINE_DIR
from onceflow.log.segment import NO_RULES, OffsetRules, gaps_allowed, scan_file
from onceflow.log.tail_recovery import TailCut, read_known_gaps

# Every broker writes meta.json at its first start; topics.json once a topic exists.
DATA_DIR_FILES = ("meta.json", REGISTRY_FILE)


@dataclass
class SegmentCheck:
    path: Path
    base_offset: int
    size: int
    batches: int
    end_offset: int  # the offset after the last sound batch
    problem: str | None


@dataclass
class PartitionCheck:
    topic: str
    partition: int
    recovery_point: int | None
    segments: list[SegmentCheck] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def first_problem(self) -> SegmentCheck | None:
        return next((segment for segment in self.segments if segment.problem), None)

    @property
    def end_offset(self) -> int:
        return self.segments[-1].end_offset if self.segments else 0

    @property
    def status(self) -> str:
        bad = self.first_problem
        readable_end = bad.end_offset if bad else self.end_offset
        if self.recovery_point is not None and readable_end < self.recovery_point:
            return "damaged"
        return "torn tail" if bad else "ok"

    def describe(self) -> str:
        bad = self.first_problem
        point = "none" if self.recovery_point is None else str(self.recovery_point)
        if bad is None:
            detail = f"offsets up to {self.end_offset}"
            if self.status == "damaged":
                detail += f", but offsets below {point} were acknowledged: data is missing"
            return f"{self.name}: {self.status} ({detail}; recovery point {point})"
        return (
            f"{self.name}: {self.status}: {bad.path.name}: {bad.problem}; sound up to offset "
            f"{bad.end_offset} (recovery point {point})"
        )


def check_segment(
    path: Path, crc_from_offset: int | None = 0, rules: OffsetRules = NO_RULES
) -> SegmentCheck:
    base_offset = int(path.stem)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        scan = scan_file(fd, size, base_offset, crc_from_offset, rules)
    finally:
        os.close(fd)
    return SegmentCheck(path, base_offset, size, len(scan.headers), scan.end_offset, scan.problem)


def _registry(data_dir: Path) -> dict:
    path = data_dir / REGISTRY_FILE
    return json.loads(path.read_text()) if path.exists() else {"topics": {}}


def is_data_dir(path: Path) -> bool:
    """Whether ``path`` is a onceflow broker's data directory (it has run there)."""
    return any((path / name).is_file() for name in DATA_DIR_FILES)


def _topic_config(entry: dict) -> TopicConfig:
    return TopicConfig(
        BrokerConfig.from_strings({}), validate_topic_configs(entry.get("configs", {}))
    )


def check_partition(
    directory: Path, topic: str, number: int, config: TopicConfig, point: int | None
) -> PartitionCheck:
    """Check one partition's segments in order, each against its neighbours."""
    report = PartitionCheck(topic, number, point)
    gaps = gaps_allowed(directory, config)
    known_gaps = read_known_gaps(directory)
    paths = sorted(directory.glob("*.log"))
    previous_end = None
    for index, path in enumerate(paths):
        base = int(path.stem)
        if (previous_end, base) in known_gaps:
            previous_end = base
        limit = int(paths[index + 1].stem) if index + 1 < len(paths) else None
        rules = OffsetRules(gaps_allowed=gaps, limit=limit, previous_end=previous_end)
        report.segments.append(check_segment(path, 0, rules))
        previous_end = report.segments[-1].end_offset
        if report.segments[-1].problem:
            break
    return report


def check_data_dir(data_dir: Path) -> list[PartitionCheck]:
    """Check every partition of the data directory without changing anything."""
    points = read_recovery_points(data_dir / RECOVERY_POINT_FILE)
    reports = []
    for topic, entry in sorted(_registry(data_dir)["topics"].items()):
        config = _topic_config(entry)
        for number in range(entry["partitions"]):
            directory = data_dir / f"{topic}-{number}"
            point = points.get((topic, number))
            reports.append(check_partition(directory, topic, number, config, point))
    return reports


@dataclass
class RepairReport:
    """What ``repair`` did to one partition."""

    before: PartitionCheck
    after: PartitionCheck
    cuts: list[TailCut]
    continues_at: int  # the partition's next offset (never one that was cut)

    def describe(self) -> list[str]:
        lines = []
        point = self.before.recovery_point
        for cut in self.cuts:
            copies = ", ".join(str(copy) for copy in cut.copies)
            lost = ""
            if point is not None and cut.from_offset < point:
                lost = (
                    f"acknowledged offsets {cut.from_offset}-{point - 1} (below the recovery "
                    f"point {point}) are gone; "
                )
            lines.append(
                f"  cut {self.before.name} from offset {cut.from_offset}: {lost}"
                f"{cut.region.describe()}; the cut bytes are in {copies}"
            )
        lines.append(
            f"  repaired: {self.after.describe()}; new records start at offset "
            f"{self.continues_at} (no offset is reused)"
        )
        return lines


def repair(data_dir: Path, report: PartitionCheck) -> RepairReport:
    """Cut the partition at its first bad batch (a copy goes to quarantine/).

    The log then continues at its recovery point at least: offsets that were
    acknowledged, and may have been read, are never handed out again (the skipped range
    is recorded in ``partition.json``).
    """
    entry = _registry(data_dir)["topics"][report.topic]
    partition = PartitionLog(
        data_dir / report.name,
        report.topic,
        report.partition,
        _topic_config(entry),
        recovery_point=None,  # check every batch, cut from the first bad one on
        quarantine_root=data_dir / QUARANTINE_DIR,
    )
    partition.load()
    try:
        if report.recovery_point is not None:
            partition.skip_to(report.recovery_point)
        end = partition.log_end_offset
    finally:
        partition.close()
    points = read_recovery_points(data_dir / RECOVERY_POINT_FILE)
    points[(report.topic, report.partition)] = end
    write_recovery_point_file(data_dir / RECOVERY_POINT_FILE, points)
    (after,) = [r for r in check_data_dir(data_dir) if r.name == report.name]
    return RepairReport(report, after, partition.cuts, end)
