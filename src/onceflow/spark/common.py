"""What the data sources share: option names, sink ids and the running task's identity."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")

# PySpark's worker leaves the traceback out of the error it sends to Spark when this is set.
_HIDE_TRACEBACK = "SPARK_HIDE_TRACEBACK"


@contextmanager
def one_line_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Make an error of one of ``kinds`` reach the user as its one-line message, without
    the Python traceback PySpark normally sends along.

    For the Python worker that runs the block (creating a data source at ``load()``, a
    driver call of a query, a task): the variable is set only while such an error leaves
    the block, and cleared again the next time a block starts in that (reused) worker, so
    other errors keep their tracebacks.
    """
    os.environ.pop(_HIDE_TRACEBACK, None)
    try:
        yield
    except kinds:
        os.environ[_HIDE_TRACEBACK] = "1"
        raise


def lower_case_options(options: Mapping[Any, Any]) -> dict[str, str]:
    """Option names lower-cased, as Spark compares them; unset (None) options left out."""
    return {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}


def kafka_client_config(
    options: Mapping[str, str], refused: Mapping[str, str], error: type[Exception]
) -> dict[str, str]:
    """The Kafka client settings among lower-cased ``options`` (``kafka.`` prefix removed);
    a setting in ``refused`` raises ``error`` with the reason given there."""
    config: dict[str, str] = {}
    for name, value in options.items():
        if name.startswith("kafka."):
            key = name[len("kafka.") :]
            if key in refused:
                raise error(f"option 'kafka.{key}' is not supported: {refused[key]}")
            config[key] = str(value)
    return config


def sink_id_of(
    options: Mapping[str, str], streaming: bool, missing: str, error: type[Exception]
) -> str:
    """The ``sinkId`` option (lower-cased ``options``): required for streaming queries
    (``missing`` says why, raised as ``error``); a batch write without one gets a fresh id."""
    sink_id = options.get("sinkid")
    if not sink_id:
        if streaming:
            raise error(missing)
        sink_id = f"batch-{uuid.uuid4().hex}"
    if not SINK_ID.fullmatch(sink_id):
        raise error(f"sinkId {sink_id!r}: use letters, digits, '.', '_' and '-'")
    return sink_id


@dataclass(frozen=True)
class SinkTask:
    """The Spark task a sink's ``write`` runs in: its partition and, in a streaming query,
    the micro-batch and query (both None in a batch write, or outside Spark)."""

    partition: int
    batch_id: int | None
    query_id: str | None


def current_task() -> SinkTask:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return SinkTask(0, None, None)
    batch = context.getLocalProperty("streaming.sql.batchId")
    return SinkTask(
        context.partitionId(),
        int(batch) if batch is not None else None,
        context.getLocalProperty("sql.streaming.queryId"),
    )
