"""Shrink a failing kill schedule to the fewest kills that still break the pipeline.

``fails(schedule)`` runs a fresh trial; the search tries every single fault first (most
bugs need one fault at the wrong step), those that land exactly (at a named step or a held
request) before those timed by output growth, whose replays are a race; then it drops
faults one at a time while the rest still fails. ``budget`` bounds the number of trials.
"""

from __future__ import annotations

from collections.abc import Callable

from onceflow.faults.schedule import PROGRESS, TIME, Schedule


def shrink(schedule: Schedule, fails: Callable[[Schedule], bool], budget: int = 12) -> Schedule:
    if len(schedule) <= 1:
        return schedule
    tried: set[Schedule] = set()

    def attempt(candidate: Schedule) -> bool:
        nonlocal budget
        if candidate in tried or budget <= 0:
            return False
        tried.add(candidate)
        budget -= 1
        return fails(candidate)

    singles = sorted(dict.fromkeys(schedule), key=lambda fault: fault.trigger in (PROGRESS, TIME))
    for fault in singles:
        if attempt((fault,)):
            return (fault,)
    smallest = schedule
    shrunk = True
    while shrunk and len(smallest) > 2:
        shrunk = False
        for position in range(len(smallest)):
            candidate = smallest[:position] + smallest[position + 1 :]
            if attempt(candidate):
                smallest, shrunk = candidate, True
                break
    return smallest
