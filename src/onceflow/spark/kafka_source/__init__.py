"""The ``onceflow`` Kafka source: options, offsets, driver-side planning and the executors'
range reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onceflow.spark.kafka_source.data_source import OnceflowDataSource

__all__ = ["OnceflowDataSource"]


def __getattr__(name: str) -> Any:
    # Lazy: the modules below this package (offsets, say) are imported without the source.
    if name == "OnceflowDataSource":
        from onceflow.spark.kafka_source.data_source import OnceflowDataSource

        return OnceflowDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
