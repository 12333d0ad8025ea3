"""The source's Spark tasks: one offset range of one partition each, the settings a task
reads with, and the read itself (on the executors)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from onceflow.spark.kafka_source.offsets import OffsetMap, OffsetRange, split_ranges
from onceflow.spark.kafka_source.options import SourceOptions, one_line_errors
from onceflow.spark.kafka_source.reader import ReadSettings, read_range, report_data_loss


class OffsetRangePartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range

    def __repr__(self) -> str:
        r = self.range
        return f"OffsetRangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def read_settings(options: SourceOptions) -> ReadSettings:
    return ReadSettings(
        kafka_config=dict(options.kafka_config),
        fail_on_data_loss=options.fail_on_data_loss,
        include_headers=options.include_headers,
        poll_timeout_ms=options.poll_timeout_ms,
        max_records_per_batch=options.max_records_per_batch,
        unavailable_timeout_ms=options.unavailable_timeout_ms,
    )


def read_partition(partition: InputPartition, settings: ReadSettings) -> Iterator[Any]:
    if not isinstance(partition, OffsetRangePartition):
        return iter(())  # Spark's placeholder partition when a batch read has no ranges
    return _one_line(read_range(partition.range, settings))


def _one_line(batches: Iterator[Any]) -> Iterator[Any]:
    """The task's batches; a cluster unavailable for too long fails it with one line."""
    with one_line_errors():
        yield from batches


def range_partitions(
    start: OffsetMap, end: OffsetMap, fail_on_data_loss: bool, min_partitions: int | None
) -> list[OffsetRangePartition]:
    ranges = []
    for (topic, partition), stop in sorted(end.items()):
        begin = start.get((topic, partition))
        if begin is None:
            continue
        if stop < begin:
            report_data_loss(
                fail_on_data_loss,
                f"Partition {topic}-{partition}'s offset was changed from {begin} to {stop}",
            )
            continue
        ranges.append(OffsetRange(topic, partition, begin, stop))
    return [OffsetRangePartition(r) for r in split_ranges(ranges, min_partitions)]
