"""``onceflow log check``: every segment of a stopped broker's data directory, checked.

Every batch's size, magic, offsets and CRC-32C are checked (start-up checks CRCs only after
the recovery point). A partition is reported as one of:

- ``ok``: every batch is sound;
- ``torn tail``: damage after the recovery point, which start-up cuts by itself (with a
  quarantine copy);
- ``damaged``: damage below the recovery point (acknowledged data), or a log that ends
  before it: start-up keeps the partition offline until ``--repair``.

``repair`` cuts a damaged partition at its first bad batch, keeping the cut bytes in
``quarantine/``, and moves its recovery point back to the new end. The broker must be
stopped.
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
from onceflow.log.segment import scan_file


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


def check_segment(path: Path, crc_from_offset: int | None = 0) -> SegmentCheck:
    base_offset = int(path.stem)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        scan = scan_file(fd, size, base_offset, crc_from_offset)
    finally:
        os.close(fd)
    end = scan.headers[-1].next_offset if scan.headers else base_offset
    return SegmentCheck(path, base_offset, size, len(scan.headers), end, scan.problem)


def _registry(data_dir: Path) -> dict:
    path = data_dir / REGISTRY_FILE
    return json.loads(path.read_text()) if path.exists() else {"topics": {}}


def check_data_dir(data_dir: Path) -> list[PartitionCheck]:
    """Check every partition of the data directory without changing anything."""
    points = read_recovery_points(data_dir / RECOVERY_POINT_FILE)
    reports = []
    for topic, entry in sorted(_registry(data_dir)["topics"].items()):
        for number in range(entry["partitions"]):
            report = PartitionCheck(topic, number, points.get((topic, number)))
            for path in sorted((data_dir / f"{topic}-{number}").glob("*.log")):
                report.segments.append(check_segment(path))
                if report.segments[-1].problem:
                    break
            reports.append(report)
    return reports


def repair(data_dir: Path, report: PartitionCheck) -> PartitionCheck:
    """Cut the partition at its first bad batch (a copy goes to quarantine/)."""
    entry = _registry(data_dir)["topics"][report.topic]
    config = TopicConfig(
        BrokerConfig.from_strings({}), validate_topic_configs(entry.get("configs", {}))
    )
    partition = PartitionLog(
        data_dir / report.name,
        report.topic,
        report.partition,
        config,
        recovery_point=None,  # check every batch, cut from the first bad one on
        quarantine_root=data_dir / QUARANTINE_DIR,
    )
    partition.load()
    end = partition.log_end_offset
    partition.close()
    points = read_recovery_points(data_dir / RECOVERY_POINT_FILE)
    points[(report.topic, report.partition)] = end
    write_recovery_point_file(data_dir / RECOVERY_POINT_FILE, points)
    (after,) = [r for r in check_data_dir(data_dir) if r.name == report.name]
    return after
