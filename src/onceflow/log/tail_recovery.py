"""Start-up recovery of a partition: its segments, then its producer state.

What a recovery point (the ``recovery-point-offset-checkpoint`` file, as in Kafka) says was
durable is trusted: only batches after it are CRC-checked, and an invalid tail there is
cut, loudly, with a copy kept in ``quarantine/``. Damage below the recovery point is
acknowledged data: the partition goes offline instead of cutting it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onceflow.log.batch import BatchHeader, control_type_of, coordinator_epoch_of, parse_header
from onceflow.log.durability import sync_directory
from onceflow.log.producer_state import ProducerStateManager
from onceflow.log.recovery import CutRegion, describe_region, quarantine_copy
from onceflow.log.segment import LogSegment, OffsetRules, SegmentScan
from onceflow.log.txn_index import AbortedTxn

log = logging.getLogger(__name__)


CHECKPOINT_FILE = "partition.json"


def read_known_gaps(directory: Path) -> set[tuple[int, int]]:
    """Offset ranges [end, base) a repair skipped on purpose (``partition.json``'s
    ``skipped_offsets``): a segment at ``base`` may follow one ending at ``end``."""
    try:
        checkpoint = json.loads((directory / CHECKPOINT_FILE).read_text())
    except (OSError, ValueError):
        return set()
    return {(int(end), int(base)) for end, base in checkpoint.get("skipped_offsets", [])}


@dataclass(slots=True)
class TailCut:
    """What recovery cut from a partition: the offsets it held and where the copy is."""

    from_offset: int  # the first offset no longer in the log
    region: CutRegion
    copies: list[Path]


REPAIR_HINT = (
    "Nothing was cut: inspect it with 'onceflow log check', repair with "
    "'onceflow log check --repair' (the broker stopped)"
)


def damage_reason(problem: str, path: Path, position: int, found: str, loss: str) -> str:
    """Why a partition is offline, in words: the damage, the file and byte, when it was
    found, what it costs and what to do (the one ERROR line and what clients are told)."""
    return f"{problem} in {path} at byte {position}, found {found}: {loss}. {REPAIR_HINT}"


class PartitionOffline(Exception):
    """The partition cannot be served without losing acknowledged data. ``damaged``: its
    stored data is damaged (not merely unwritable)."""

    def __init__(self, reason: str, damaged: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.damaged = damaged


def recover_segments(
    segments: list[LogSegment],
    name: str,
    crc_from_offset: int | None,
    recovery_point: int | None,
    quarantine_root: Path,
    drop_txn_entries_from: Callable[[int], object],
    known_gaps: set[tuple[int, int]] = frozenset(),  # type: ignore[assignment]
    cuts: list[TailCut] | None = None,
) -> list[BatchHeader]:
    """Scan and load every segment; cut an invalid tail after the recovery point (with a
    copy), dropping the later segments from ``segments``.

    Returns the headers of every batch kept; what was cut is appended to ``cuts``. Raises
    PartitionOffline when the damage lies below the recovery point, or the log ends
    before it.
    """
    headers: list[BatchHeader] = []
    previous_end: int | None = None
    for index, segment in enumerate(segments):
        if (previous_end, segment.base_offset) in known_gaps:
            previous_end = segment.base_offset
        rules = OffsetRules(
            gaps_allowed=segment.gaps_allowed,
            limit=segments[index + 1].base_offset if index + 1 < len(segments) else None,
            previous_end=previous_end,
        )
        scan = segment.scan(crc_from_offset, rules)
        previous_end = scan.end_offset
        if scan.problem is not None:
            readable_end = scan.end_offset
            if recovery_point is not None and readable_end < recovery_point:
                raise PartitionOffline(
                    damage_reason(
                        scan.reason or scan.problem,
                        segment.log_path,
                        scan.problem_at,
                        "at start-up",
                        f"offsets {readable_end}-{recovery_point - 1} are acknowledged "
                        f"(below the recovery point {recovery_point}) and unreadable: "
                        "acknowledged data is damaged",
                    )
                )
            try:
                region, copies = _cut_tail(segments, index, scan, name, quarantine_root)
                drop_txn_entries_from(readable_end)
            except OSError as error:
                raise PartitionOffline(
                    f"cannot cut the invalid tail of {segment.log_path}: {error}", damaged=False
                ) from None
            log.warning(
                "%s: %s in %s; cut the tail after offset %d: %s; a copy is in %s",
                name,
                scan.problem,
                segment.log_path.name,
                readable_end - 1,
                region.describe(),
                ", ".join(str(copy) for copy in copies),
            )
            if cuts is not None:
                cuts.append(TailCut(readable_end, region, copies))
        segment.load(scan)
        headers.extend(scan.headers)
        if scan.problem is not None:
            break
    end = segments[-1].next_offset
    if recovery_point is not None and end < recovery_point:
        raise PartitionOffline(
            damage_reason(
                f"the log ends at offset {end}",
                segments[-1].log_path,
                segments[-1].size,
                "at start-up",
                f"offsets {end}-{recovery_point - 1} are acknowledged (below the recovery "
                f"point {recovery_point}) and missing: acknowledged data is missing",
            )
        )
    return headers


def _cut_tail(
    segments: list[LogSegment], index: int, scan: SegmentScan, name: str, quarantine_root: Path
) -> tuple[CutRegion, list[Path]]:
    """Cut segment ``index`` after its last good batch and drop every later segment, with
    a quarantine copy of what is cut; raises OSError."""
    segment = segments[index]
    doomed = [(segment, scan.valid_end)] + [(later, 0) for later in segments[index + 1 :]]
    region = CutRegion()
    copies = []
    expected = scan.end_offset
    for victim, start in doomed:
        if start == 0:
            expected = max(expected, victim.base_offset)
        part = describe_region(victim.log_path, start, victim.size, expected, victim.gaps_allowed)
        region.add(part)
        expected = part.last_offset + 1 if part.batches else expected
        copies.append(quarantine_copy(quarantine_root, name, victim.log_path, start))
    segment.cut_back(scan.valid_end)
    for victim, _ in doomed[1:]:
        victim.delete()
    del segments[index + 1 :]
    sync_directory(segment.log_path.parent)
    return region, copies


def rebuild_producer_state(
    producers: ProducerStateManager,
    headers: list[BatchHeader],
    log_end_offset: int,
    aborted: list[AbortedTxn],
    read_batch: Callable[[BatchHeader], bytes],
    write_txn_entry: Callable[[AbortedTxn], None],
) -> list[AbortedTxn]:
    """Replay the batches after the latest producer-state snapshot; return the aborted
    transactions (sorted by last offset), indexing those the index missed."""
    replay_from = max(producers.load_latest_snapshot(log_end_offset), 0)
    known = {(txn.producer_id, txn.last_offset) for txn in aborted}
    aborted = [txn for txn in aborted if txn.last_offset < replay_from]
    for header in headers:
        if header.base_offset < replay_from:
            continue
        control_type, coordinator_epoch = None, -1
        if header.is_control:
            data = read_batch(header)
            header_copy = parse_header(data)
            control_type = control_type_of(data, header_copy)
            coordinator_epoch = coordinator_epoch_of(data, header_copy)
        completed = producers.replay(header, control_type, coordinator_epoch)
        if completed is not None and completed.aborted:
            entry = AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                producers.first_unstable_offset() or completed.last_offset + 1,
            )
            aborted.append(entry)
            if (entry.producer_id, entry.last_offset) not in known:
                write_txn_entry(entry)
    return sorted(aborted, key=lambda txn: txn.last_offset)
