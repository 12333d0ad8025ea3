"""The source's batch reader (``spark.read``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from onceflow.spark.kafka_source.offset_reader import OffsetReader
from onceflow.spark.kafka_source.options import SourceOptions, one_line_errors
from onceflow.spark.kafka_source.tasks import range_partitions, read_partition, read_settings


class OnceflowBatchReader(DataSourceReader):
    """``spark.read``: the ranges between ``startingOffsets`` and ``endingOffsets``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = read_settings(options)

    def partitions(self) -> list[InputPartition]:
        offsets = OffsetReader(self.options)
        try:
            with one_line_errors():
                partitions = offsets.partitions()
                start = offsets.resolve(
                    self.options.starting_offsets, partitions, "startingOffsets"
                )
                end = offsets.resolve(self.options.ending_offsets, partitions, "endingOffsets")
        finally:
            offsets.close()
        return list(
            range_partitions(
                start, end, self.options.fail_on_data_loss, self.options.min_partitions
            )
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.settings)
