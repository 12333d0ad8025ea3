"""Durations of something that happens often (a request, an fsync): how many, their sum,
and the quantiles of the recent ones.

Kafka's request and flush timers are Yammer histograms over an exponentially decaying
reservoir of 1,028 samples; ``Timings`` keeps the last 1,028 durations, which answers the
same question (what do these take lately?) with a cost of one append per event.
"""

from __future__ import annotations

from collections import deque

RESERVOIR = 1028
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)  # the percentiles a Yammer timer has


class Timings:
    __slots__ = ("_recent", "count", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self._recent: deque[float] = deque(maxlen=RESERVOIR)

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.sum += seconds
        self._recent.append(seconds)

    def quantiles(self) -> dict[float, float]:
        """Each of ``QUANTILES`` over the recent durations (empty before the first)."""
        ordered = sorted(self._recent)
        if not ordered:
            return {}
        last = len(ordered) - 1
        return {q: ordered[min(last, int(q * len(ordered)))] for q in QUANTILES}
