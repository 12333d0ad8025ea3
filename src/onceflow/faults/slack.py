"""The input a paced run lets in beyond what its next fault needs (the slack), and when the
pipeline is idle for want of input: quiet for longer than it usually is between two writes
(a pipeline that writes every few seconds is not idle after two), and not still reading
what the slack let in last time."""

from __future__ import annotations

from collections import deque

GAPS = 5  # the last times between two output growths the pipeline's usual gap is taken from
USUAL_GAP_FACTOR = 1.5


class Slack:
    def __init__(self, settle_s: float, reading_s: float) -> None:
        self.records = 0
        self.settle_s = settle_s  # quiet at least this long
        self.reading_s = reading_s  # what it let in is read within this long
        self.grown_at = 0.0
        self.gaps: deque[float] = deque(maxlen=GAPS)

    def output_grew(self, quiet_s: float) -> None:
        self.gaps.append(quiet_s)

    def idle(self, now: float, last_growth: float) -> bool:
        usual = sorted(self.gaps)[len(self.gaps) // 2] if self.gaps else 0.0
        if now - last_growth < max(self.settle_s, USUAL_GAP_FACTOR * usual):
            return False
        return not (self.grown_at > last_growth and now - self.grown_at < self.reading_s)

    def grow(self, batch: int, now: float) -> None:
        """Twice as much each time."""
        self.records, self.grown_at = max(2 * self.records, batch), now

    def reset(self) -> None:
        """A new fault: the input is let in from its own window again."""
        self.records = 0
