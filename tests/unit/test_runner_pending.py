"""What a Runner keeps between commits: where the uncommitted batches start and end."""

from __future__ import annotations

import time

from onceflow.patterns.runner_pending import Pending


class FakeMessage:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


def batch(*where: tuple[str, int, int]) -> list[FakeMessage]:
    return [FakeMessage(*w) for w in where]


def test_batches_merge_into_first_starts_and_last_ends():
    pending = Pending()
    assert not pending and not pending.due(0)
    pending.add(batch(("a", 0, 10), ("a", 1, 5), ("a", 0, 11)))
    pending.add(batch(("a", 1, 6), ("b", 0, 0), ("a", 0, 12)))
    assert pending
    assert pending.starts == {("a", 0): 10, ("a", 1): 5, ("b", 0): 0}
    assert pending.ends == {("a", 0): 13, ("a", 1): 7, ("b", 0): 1}


def test_take_hands_everything_over_and_starts_empty():
    pending = Pending()
    pending.add(batch(("a", 0, 3)))
    taken = pending.take()
    assert taken.starts == {("a", 0): 3} and taken.ends == {("a", 0): 4} and taken
    assert not pending and pending.starts == {} and pending.ends == {}
    pending.add(batch(("a", 0, 4)))
    assert pending.starts == {("a", 0): 4}  # a fresh interval begins at the next batch


def test_due_after_the_interval_and_always_at_zero():
    pending = Pending()
    pending.add(batch(("a", 0, 0)))
    assert pending.due(0)
    assert not pending.due(60_000)
    pending.since = time.monotonic() - 0.2
    assert pending.due(100) and not pending.due(1000)


def test_dropping_the_last_partition_empties_it():
    pending = Pending()
    pending.add(batch(("a", 0, 0), ("a", 1, 0)))
    pending.drop(("a", 0))
    assert pending and pending.starts == {("a", 1): 0}
    pending.drop(("a", 1))
    assert not pending and not pending.due(0)
