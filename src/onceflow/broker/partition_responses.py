"""The topic → partitions nesting that many responses share: one entry per topic, each
holding one entry per partition, in the order the partitions first appear."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

Result = TypeVar("Result")


def by_topic(
    results: Iterable[tuple[tuple[str, int], Result]],
) -> dict[str, list[tuple[int, Result]]]:
    topics: dict[str, list[tuple[int, Result]]] = {}
    for (topic, partition), result in results:
        topics.setdefault(topic, []).append((partition, result))
    return topics


def topic_responses(
    topic_cls: type,
    results: Mapping[tuple[str, int], Result],
    partition_response: Callable[[int, Result], Any],
    partitions_field: str = "partitions",
) -> tuple[Any, ...]:
    """``topic_cls`` entries for ``results`` keyed by (topic, partition)."""
    return tuple(
        topic_cls(
            name=name,
            **{partitions_field: tuple(partition_response(p, result) for p, result in partitions)},
        )
        for name, partitions in by_topic(results.items()).items()
    )


def partition_errors(
    partition_cls: type, error_field: str = "error_code"
) -> Callable[[int, Any], Any]:
    """A partition entry holding just its index and error code."""
    return lambda partition, code: partition_cls(partition_index=partition, **{error_field: code})
