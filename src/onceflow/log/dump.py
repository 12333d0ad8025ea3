"""What ``onceflow log dump`` prints for each of the broker's on-disk files.

The equivalent of Apache Kafka's ``kafka-dump-log.sh``, with Kafka's wording so its output
reads (and greps) the same: a line per batch of a ``.log`` segment, with
``print_data_log`` a ``| ``-prefixed line per record, and the entries of ``.index``,
``.timeindex``, ``.txnindex``, producer-state ``.snapshot`` files and ``partition.json``.

Everything here only reads: files are opened read-only and none of the broker's loading
code (which truncates torn tails and rewrites indexes) is used. Each function yields
``DumpLine``s; a line with ``problem`` set reports damage (a batch whose CRC does not
match, bytes at the end that are not a whole batch or entry, an unreadable snapshot).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from onceflow.log.dump_entries import (
    dump_offset_index,
    dump_partition_checkpoint,
    dump_producer_snapshot,
    dump_time_index,
    dump_txn_index,
)
from onceflow.log.dump_lines import DumpError, DumpLine, DumpOptions
from onceflow.log.dump_segment import dump_log_segment

__all__ = ["DumpError", "DumpLine", "DumpOptions", "dump_file", "dumper_for"]


def dump_file(path: Path, options: DumpOptions) -> Iterator[DumpLine]:
    """The lines describing one file, chosen by its name."""
    dumper = dumper_for(path)
    if dumper is None:
        raise DumpError(
            f"{path}: unknown kind of file (expected .log, .index, .timeindex, .txnindex, "
            ".snapshot or partition.json)"
        )
    yield from dumper(path, options)


def dumper_for(path: Path) -> Callable[[Path, DumpOptions], Iterator[DumpLine]] | None:
    if path.name == "partition.json":
        return dump_partition_checkpoint
    return {
        ".log": dump_log_segment,
        ".index": dump_offset_index,
        ".timeindex": dump_time_index,
        ".txnindex": dump_txn_index,
        ".snapshot": dump_producer_snapshot,
    }.get(path.suffix)
