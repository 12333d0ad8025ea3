"""What the session that records the class archive runs: a Python streaming source into
``noop`` and into a Python streaming sink (the classes onceflow's source and sinks load)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)


class OneRow(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self) -> dict:
        return {"offset": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, bytes, bytes]]:
        yield (1, b"key", b"value")

    def commit(self, end: dict) -> None:
        pass


class Nowhere(DataSourceStreamWriter):
    def write(self, rows: Iterator[Any]) -> WriterCommitMessage:
        for _ in rows:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        pass


class RecordedSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "onceflow_class_archive"

    def schema(self) -> str:
        return "x int, key binary, value binary"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return OneRow()

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return Nowhere()
