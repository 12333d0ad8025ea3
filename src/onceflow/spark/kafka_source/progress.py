"""The onceflow source's metrics, computed from a streaming query's progress.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``avgOffsetsBehindLatest`` and
``maxOffsetsBehindLatest`` in ``progress["sources"][i]["metrics"]``. Spark (up to 4.3) gives
Python data sources no way to fill that map or to set the source's description (its
``PythonMicroBatchStream`` implements neither ``ReportsSourceMetrics`` nor ``toString``),
so the same figures are derived here from what the progress does carry: the batch's end
offsets and the latest offsets the source reported (``reportLatestOffset``).

    progress = query.lastProgress
    for source in onceflow_sources(progress):
        print(describe(source), source_metrics(source)["maxOffsetsBehindLatest"])
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from onceflow.spark.kafka_source.offsets import OffsetMap, from_spark

_PYTHON_STREAM = "datasources.v2.python.PythonMicroBatchStream"


def _offsets(value: Any) -> OffsetMap | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    try:
        return from_spark(value)
    except ValueError:
        return None


def onceflow_sources(progress: Mapping[str, Any] | None) -> Iterator[Mapping[str, Any]]:
    """The entries of ``progress["sources"]`` that are onceflow (Python, Kafka offsets)."""
    for source in (progress or {}).get("sources") or []:
        if _PYTHON_STREAM in str(source.get("description", "")) and (
            _offsets(source.get("endOffset")) is not None
        ):
            yield source


def offsets_behind_latest(source: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    """Per partition: records between the batch's end and the latest offset seen."""
    end = _offsets(source.get("endOffset")) or {}
    latest = _offsets(source.get("latestOffset")) or {}
    return {tp: max(0, offset - end.get(tp, 0)) for tp, offset in sorted(latest.items())}


def source_metrics(source: Mapping[str, Any]) -> dict[str, str]:
    """Spark Kafka source's lag metrics (strings, as in Spark's metrics map)."""
    behind = list(offsets_behind_latest(source).values())
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "avgOffsetsBehindLatest": f"{sum(behind) / len(behind):.1f}",
        "maxOffsetsBehindLatest": str(max(behind)),
    }


def describe(source: Mapping[str, Any]) -> str:
    """A readable name in the style of Spark's ``KafkaV2[Subscribe[orders]]``."""
    topics = sorted({topic for topic, _ in _offsets(source.get("endOffset")) or {}})
    return f"OnceflowSource[{','.join(topics)}]"
