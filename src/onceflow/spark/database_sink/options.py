"""Options of the ``onceflow-database`` sink (listed on ``DatabaseSinkDataSource``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.db import Database
from onceflow.spark.common import lower_case_options, sink_id_of

STRATEGIES = ("direct", "staged")
_KNOWN = {
    "url",
    "table",
    "mode",
    "keycolumns",
    "sinkid",
    "checkpointlocation",
    "locktimeoutms",
    "strategy",
    "path",
    "queryname",  # Spark passes writeStream.queryName(...) to the sink as an option
}


class DatabaseSinkError(ValueError):
    """An option of the database sink is missing or wrong."""


@dataclass(frozen=True)
class DatabaseSinkOptions:
    url: str
    table: str
    mode: str
    keys: tuple[str, ...]
    sink_id: str
    checkpoint: str | None
    lock_timeout_ms: int
    strategy: str = "direct"


def parse_database_options(options: Mapping[str, Any], streaming: bool) -> DatabaseSinkOptions:
    opts = lower_case_options(options)
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise DatabaseSinkError(
            f"unknown option(s) {unknown} for onceflow-database "
            "(known: url, table, mode, keyColumns, strategy, sinkId, checkpointLocation, "
            "lockTimeoutMs)"
        )
    for required in ("url", "table"):
        if not opts.get(required):
            raise DatabaseSinkError(f"onceflow-database needs the option {required!r}")
    sink_id = sink_id_of(
        opts,
        streaming,
        "onceflow-database needs the option 'sinkId' (stable name of this sink: its "
        "offsets in the database are stored under it)",
        DatabaseSinkError,
    )
    if streaming and not opts.get("checkpointlocation"):
        raise DatabaseSinkError(
            "onceflow-database needs option('checkpointLocation', ...) on the query itself: "
            "the sink reads each batch's source offsets from Spark's offset log there "
            "(spark.sql.streaming.checkpointLocation does not reach the sink)"
        )
    keys = tuple(k.strip() for k in opts.get("keycolumns", "").split(",") if k.strip())
    try:
        lock_timeout = int(opts.get("locktimeoutms", "60000"))
    except ValueError:
        raise DatabaseSinkError("lockTimeoutMs must be an integer (milliseconds)") from None
    if lock_timeout <= 0:
        raise DatabaseSinkError(f"lockTimeoutMs must be positive, not {lock_timeout}")
    strategy = opts.get("strategy", "direct").lower()
    if strategy not in STRATEGIES:
        raise DatabaseSinkError(
            f"strategy {opts['strategy']!r}: use direct (each task commits its rows) or "
            "staged (the driver makes each batch visible at once)"
        )
    return DatabaseSinkOptions(
        url=opts["url"],
        table=opts["table"],
        mode=opts.get("mode", "append").lower(),
        keys=keys,
        sink_id=sink_id,
        checkpoint=opts.get("checkpointlocation"),
        lock_timeout_ms=lock_timeout,
        strategy=strategy,
    )


def connect(options: DatabaseSinkOptions) -> Database:
    """A connection to the sink's database, with the sink's lock timeout."""
    return Database(
        options.url,
        lock_timeout_ms=options.lock_timeout_ms,
        statement_timeout_ms=max(300_000, options.lock_timeout_ms),
    )
