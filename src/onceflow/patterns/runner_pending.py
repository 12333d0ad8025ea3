"""The batches a Runner has processed but not committed yet (``commit_interval_ms``)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Message

TP = tuple[str, int]


class Pending:
    """Per partition, the first offset of the uncommitted batches (where to rewind when
    they fail) and the offset after their last record (what to commit)."""

    def __init__(self) -> None:
        self.since: float | None = None  # monotonic time of the first uncommitted batch
        self.starts: dict[TP, int] = {}
        self.ends: dict[TP, int] = {}

    def __bool__(self) -> bool:
        return self.since is not None

    def add(self, messages: Iterable[Message]) -> None:
        if self.since is None:
            self.since = time.monotonic()
        starts, ends = self.starts, self.ends
        for message in messages:
            tp = (message.topic(), message.partition())
            offset = message.offset()
            if tp not in starts:
                starts[tp] = offset
            ends[tp] = offset + 1

    def due(self, interval_ms: int) -> bool:
        """Whether the oldest uncommitted batch is ``interval_ms`` old (0: always)."""
        if self.since is None:
            return False
        return interval_ms == 0 or (time.monotonic() - self.since) * 1000 >= interval_ms

    def take(self) -> Pending:
        """Hand over what is pending and start empty."""
        taken = Pending()
        taken.since, taken.starts, taken.ends = self.since, self.starts, self.ends
        self.since, self.starts, self.ends = None, {}, {}
        return taken

    def drop(self, tp: TP) -> None:
        """Forget a partition (lost to another consumer)."""
        self.starts.pop(tp, None)
        self.ends.pop(tp, None)
        if not self.starts:
            self.since = None
