"""Shrink a failing kill schedule to the fewest kills that still break the pipeline.

``fails(schedule)`` runs a fresh trial; the search tries every single kill first (most
bugs need one kill at the wrong step), then drops kills one at a time while the rest
still fails. ``budget`` bounds the number of trials.
"""

from __future__ import annotations

from collections.abc import Callable

from onceflow.prove.schedule import Schedule


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

    for kill in dict.fromkeys(schedule):
        if attempt((kill,)):
            return (kill,)
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
