"""Time and size retention (``cleanup.policy=delete``): which old segments go."""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.config import TopicConfig
from onceflow.log.segment import LogSegment


def expired_segments(
    segments: Sequence[LogSegment], config: TopicConfig, high_watermark: int, now_ms: int
) -> list[bool]:
    """The oldest segments retention.ms / retention.bytes delete, in order: for each,
    whether only its timestamps condemn it (retention.ms; retention.bytes would keep it).
    Never the active segment, nor one holding offsets at or above the high watermark."""
    if "delete" not in str(config["cleanup.policy"]).split(","):
        return []
    retention_ms = config["retention.ms"]
    retention_bytes = config["retention.bytes"]
    remaining = sum(segment.size for segment in segments)
    doomed: list[bool] = []
    for oldest in segments[:-1]:
        if oldest.next_offset > high_watermark:
            break
        expired = (
            retention_ms >= 0
            and oldest.max_timestamp >= 0
            and now_ms - oldest.max_timestamp > retention_ms
        )
        oversized = retention_bytes >= 0 and remaining - oldest.size >= retention_bytes
        if not (expired or oversized):
            break
        remaining -= oldest.size
        doomed.append(not oversized)
    return doomed
