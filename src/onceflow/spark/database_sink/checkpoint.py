"""Read a streaming query's source offsets from Spark's checkpoint (the offset log).

Spark writes ``<checkpointLocation>/offsets/<batchId>`` *before* it runs batch
``batchId``: a version line (``v1``), a metadata JSON line, then one line per source with
that source's end offsets (``-`` for a source without offsets). The onceflow source's
offsets are ``{"topic": {"0": 42}}``. A sink's ``commit(messages, batchId)`` therefore
finds the end offsets of the batch it commits in the offset log, and the batch's start
offsets in the previous entry.

Only checkpoints on a filesystem the driver can read as local paths (``/path`` or
``file:/path``) are supported.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlparse

from onceflow.spark.kafka_source.offsets import OffsetMap, from_spark


class CheckpointError(RuntimeError):
    """The checkpoint cannot be read (or is not a local path)."""


def local_path(location: str) -> str:
    """``/a/b`` or ``file:/a/b`` / ``file:///a/b`` → ``/a/b``; other schemes are refused."""
    if "://" not in location and not location.startswith("file:"):
        return os.path.abspath(location)
    parsed = urlparse(location)
    if parsed.scheme != "file":
        raise CheckpointError(
            f"checkpointLocation {location!r}: onceflow sinks read the offset log with local "
            "file access; use a local or mounted (NFS) path"
        )
    return parsed.path


def _source_offsets(lines: list[str]) -> OffsetMap | None:
    """Merge every source line that holds Kafka-shaped offsets; None when there is none."""
    merged: OffsetMap = {}
    found = False
    for line in lines[2:]:
        line = line.strip()
        if not line or line == "-":
            continue
        try:
            value = json.loads(line)
            offsets = from_spark(value) if isinstance(value, dict) else None
        except ValueError:
            offsets = None
        if offsets is None:
            continue  # another kind of source (rate, files, ...)
        found = True
        merged.update(offsets)
    return merged if found else None


def batch_offsets(checkpoint: str, batch_id: int) -> OffsetMap | None:
    """End offsets of ``batch_id`` from the offset log.

    Returns None when the entry exists but holds no Kafka-shaped offsets (a non-Kafka
    source); raises CheckpointError when the entry is missing or unreadable.
    """
    path = os.path.join(local_path(checkpoint), "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError as error:
        raise CheckpointError(f"cannot read Spark's offset log entry {path}: {error}") from None
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise CheckpointError(f"offset log entry {path} is not in Spark's format")
    return _source_offsets(lines)


def previous_offsets(checkpoint: str, batch_id: int) -> OffsetMap | None:
    """End offsets of the batch before ``batch_id`` (its start), None if unknown."""
    if batch_id <= 0:
        return None
    try:
        return batch_offsets(checkpoint, batch_id - 1)
    except CheckpointError:
        return None  # purged by Spark (minBatchesToRetain) or never written


def query_id(checkpoint: str) -> str:
    """The streaming query's id from ``<checkpoint>/metadata`` (Spark writes it when the
    query first starts; tasks see the same id as their ``sql.streaming.queryId``)."""
    path = os.path.join(local_path(checkpoint), "metadata")
    try:
        with open(path, encoding="utf-8") as file:
            return str(json.loads(file.readline())["id"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"cannot read the query id from {path}: {error}") from None
