"""Source offsets: ``{"topic": {"0": 42}}`` JSON, as Spark's Kafka connector writes them.

Inside the source an offset map is ``dict[(topic, partition), next_offset]``; at the Spark
boundary it is a JSON-able dict with string partition keys (Spark stores it in the
checkpoint's offset log). ``-2`` means earliest and ``-1`` latest in user-given JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EARLIEST = "earliest"
LATEST = "latest"
EARLIEST_OFFSET = -2
LATEST_OFFSET = -1

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]


def to_spark(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` → ``{"t": {"p": o}}`` with topics and partitions in order."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def from_spark(offsets: Mapping[str, Any] | None) -> OffsetMap:
    """``{"t": {"p": o}}`` → ``{(t, p): o}``; raises ValueError on anything else."""
    if offsets is None:
        return {}
    if not isinstance(offsets, Mapping):
        raise ValueError(f"offsets must be a JSON object, got {type(offsets).__name__}")
    result: OffsetMap = {}
    for topic, partitions in offsets.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object of partition to offset")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise ValueError(
                    f"partition {partition!r} of topic {topic!r} is not an integer"
                ) from None
            if number < 0:
                raise ValueError(f"partition {partition!r} of topic {topic!r} is negative")
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise ValueError(
                    f"offset of {topic}-{partition} must be an integer, got {offset!r}"
                )
            result[(str(topic), number)] = offset
    return result


def parse_offsets_json(text: str) -> OffsetMap:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(value, dict) or not value:
        raise ValueError("expected a non-empty JSON object")
    return from_spark(value)


def to_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(to_spark(offsets), sort_keys=False, separators=(",", ":"))


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def limit_offsets(
    start: Mapping[TopicPartition, int], end: OffsetMap, max_offsets: int
) -> OffsetMap:
    """Cap ``end`` so at most ``max_offsets`` offsets are read in total.

    Offsets are shared out in proportion to each partition's backlog (like Spark's
    ``maxOffsetsPerTrigger``), rounding by largest remainder so the total is exactly
    ``min(backlog, max_offsets)``: never more than the limit, and always progress.
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(end)
    shares: dict[TopicPartition, int] = {}
    remainders: list[tuple[float, int, TopicPartition]] = []
    for tp, size in backlog.items():
        exact = max_offsets * size / total
        shares[tp] = int(exact)
        remainders.append((exact - int(exact), size, tp))
    left = max_offsets - sum(shares.values())
    for _fraction, _size, tp in sorted(remainders, key=lambda r: (-r[0], -r[1], r[2]))[:left]:
        shares[tp] += 1
    return {tp: (start[tp] + shares[tp] if tp in start else end[tp]) for tp in end}


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; split big ones so there are at least ``min_partitions``.

    Like Spark's ``minPartitions``: each range gets a number of pieces proportional to its
    size (at least one), and pieces of one range are contiguous and of near-equal size.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        pieces = min(r.size, max(1, round(r.size / total * min_partitions)))
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            stop = start + step + (1 if i < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, start, stop))
            start = stop
    return result
