"""A power-loss simulator for tests: cut every file back to what had been fsynced.

SIGKILL keeps the page cache, so a killed broker's files still hold every byte it wrote;
power loss keeps only what an fsync made durable. Run the broker with
``ONCEFLOW_FSYNC_JOURNAL`` set (see ``onceflow.log.durability``): each fsync appends the
file's inode and the size it made durable. After a SIGKILL, ``simulate_power_loss`` cuts
each file in the data directory back to its last durable size (a file never fsynced to
nothing), optionally leaving a torn tail: a random part of the unsynced bytes, some of
them overwritten with garbage or with one byte of a batch header flipped, as a disk that
lost power mid-write leaves them. The
broker then restarts on the real files, so its real recovery code runs.

Directory entries are not modelled: a file created or renamed but not yet covered by a
directory fsync survives here, whereas real power loss might lose its name.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from onceflow.log.batch import HEADER_SIZE, LOG_OVERHEAD, parse_header

# (name, position in the batch header, size) of every field of a v2 batch header
HEADER_FIELDS = (
    ("baseOffset", 0, 8),
    ("batchLength", 8, 4),
    ("partitionLeaderEpoch", 12, 4),
    ("magic", 16, 1),
    ("crc", 17, 4),
    ("attributes", 21, 2),
    ("lastOffsetDelta", 23, 4),
    ("baseTimestamp", 27, 8),
    ("maxTimestamp", 35, 8),
    ("producerId", 43, 8),
    ("producerEpoch", 51, 2),
    ("baseSequence", 53, 4),
    ("recordsCount", 57, 4),
)


@dataclass
class PowerLossReport:
    files_cut: int = 0
    bytes_cut: int = 0
    torn_files: list[str] = field(default_factory=list)
    header_flips: list[str] = field(default_factory=list)  # "file: field of the batch at N"


def read_journal(journal: Path) -> dict[int, int]:
    """Inode -> durable size, from the journal (the last entry of an inode wins)."""
    durable: dict[int, int] = {}
    if not journal.exists():
        return durable
    for line in journal.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            durable[int(parts[0])] = int(parts[1])
    return durable


def simulate_power_loss(
    data_dir: Path,
    journal: Path,
    rng: random.Random,
    torn_tails: bool = True,
    header_flips: bool = False,
) -> PowerLossReport:
    """Cut ``data_dir``'s files as power loss would; the broker must not be running.

    ``header_flips``: in a segment whose torn tail holds whole batch headers, flip one
    byte of one header field (any of them, CRC-covered or not) of a batch there, as a
    disk that lost power mid-write may leave it.

    Afterwards the journal is rewritten to say every file is durable as it now stands
    (it is: that is what the disk holds after the simulated reboot).
    """
    durable = read_journal(journal)
    report = PowerLossReport()
    files = [path for path in sorted(data_dir.rglob("*")) if path.is_file() and path != journal]
    for path in files:
        stat = path.stat()
        keep = min(durable.get(stat.st_ino, 0), stat.st_size)
        unsynced = stat.st_size - keep
        if unsynced <= 0:
            continue
        torn = rng.randint(0, unsynced) if torn_tails else 0
        with open(path, "r+b") as handle:
            handle.truncate(keep + torn)
            if torn and rng.random() < 0.5:
                start = keep + rng.randrange(torn)
                length = rng.randint(1, keep + torn - start)
                handle.seek(start)
                handle.write(rng.randbytes(length))
                report.torn_files.append(path.name)
            if torn and header_flips and path.suffix == ".log":
                flipped = _flip_header_byte(handle, keep, keep + torn, rng)
                if flipped:
                    report.header_flips.append(f"{path.parent.name}/{path.name}: {flipped}")
        report.files_cut += 1
        report.bytes_cut += unsynced - torn
    with open(journal, "w") as handle:
        for path in files:
            handle.write(f"{path.stat().st_ino} {path.stat().st_size}\n")
        handle.flush()
        os.fsync(handle.fileno())
    return report


def _flip_header_byte(handle: BinaryIO, durable: int, end: int, rng: random.Random) -> str:
    """Flip a byte of a random header field of a batch starting in ``[durable, end)``;
    describe it ("" if no whole header starts there)."""
    starts = []
    position = 0
    while position + HEADER_SIZE <= end:
        handle.seek(position)
        header = parse_header(handle.read(HEADER_SIZE))
        if header.length < HEADER_SIZE - LOG_OVERHEAD:
            break
        if position >= durable:
            starts.append(position)
        position += header.size
    if not starts:
        return ""
    start = rng.choice(starts)
    name, at, size = rng.choice(HEADER_FIELDS)
    byte = start + at + rng.randrange(size)
    handle.seek(byte)
    old = handle.read(1)[0]
    handle.seek(byte)
    handle.write(bytes([old ^ rng.randint(1, 255)]))
    return f"{name} of the batch at byte {start}"
