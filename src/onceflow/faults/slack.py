"""The input a paced run lets in beyond what its next fault needs (the slack), and when the
pipeline is idle for want of input: quiet for longer than its longest time between two of
its last writes (a pipeline that writes every few seconds is not idle after two: with the
median gap, three workers flushing every 3 s still looked idle often enough for the slack
to let in most of the input before the later faults), and not still reading what the
slack let in last time."""

from __future__ import annotations

from collections import deque

from onceflow.faults.schedule import PROGRESS, Fault

GAPS = 5  # the last times between two output growths, the longest of which is its usual gap
USUAL_GAP_FACTOR = 1.5
WATCH_WINDOW = 10  # input records let in for the commit a kill timed by outputs waits for
REQUEST_WINDOW = 20  # input records let in at a time while a request trap waits


def input_window(fault: Fault, batch_hint: int) -> int:
    """Input records to let in beyond the outputs so far while ``fault`` is due: enough
    for its trigger and the commit after it, no more (the rest of the input must last
    for the faults after it). Too little is corrected by the slack."""
    if fault.trigger == PROGRESS:
        return fault.occurrence + WATCH_WINDOW
    if fault.trapped:  # a few records at a time: a request (a commit) for each few
        return REQUEST_WINDOW
    if fault.at_crash_point:
        return (fault.occurrence + 1) * batch_hint
    return 4 * batch_hint


class Slack:
    def __init__(self, settle_s: float, reading_s: float) -> None:
        self.records = 0
        self.settle_s = settle_s  # quiet at least this long
        self.reading_s = reading_s  # what it let in is read within this long
        self.grown_at = 0.0
        self.gaps: deque[float] = deque(maxlen=GAPS)

    def output_grew(self, quiet_s: float) -> None:
        self.gaps.append(quiet_s)

    @property
    def usual_gap_s(self) -> float:
        """The longest of the last few times between two writes (0.0 before two)."""
        return max(self.gaps, default=0.0)

    def idle(self, now: float, last_growth: float, outputs: int) -> bool:
        usual = self.usual_gap_s
        if now - last_growth < max(self.settle_s, USUAL_GAP_FACTOR * usual):
            return False
        if self.grown_at <= last_growth:
            return True
        # it grew and nothing was written since: again only if what it let in was lost (a
        # pipeline that wrote nothing yet is still starting: its group forming, say)
        return outputs > 0 and now - self.grown_at >= self.reading_s

    def grow(self, batch: int, now: float) -> None:
        """Twice as much each time."""
        self.records, self.grown_at = max(2 * self.records, batch), now

    def reset(self) -> None:
        """A new fault: the input is let in from its own window again."""
        self.records = 0
