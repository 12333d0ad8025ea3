"""PySpark pipelines: the ``onceflow`` Kafka source and the exactly-once sinks.

from onceflow.spark import register
register(spark)                       # onceflow, onceflow-database, onceflow-kafka
df = (spark.readStream.format("onceflow")
      .option("kafka.bootstrap.servers", "127.0.0.1:9092")
      .option("subscribe", "orders")
      .load())
df.writeStream.format("onceflow-database").option("url", "sqlite:///out.db") ...
df.writeStream.format("onceflow-kafka").option("kafka.bootstrap.servers", ...) ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onceflow.spark.database_sink import DatabaseSinkDataSource, database_offsets
    from onceflow.spark.feedback import FeedbackLoopWarning
    from onceflow.spark.kafka_sink import KafkaSinkDataSource
    from onceflow.spark.kafka_source import OnceflowDataSource
    from onceflow.spark.workers import PythonWorkerWarning

# Imported on first use: every Python process Spark starts for a query imports this
# package on its way to one data source, and should not pay for the other two.
_EXPORTS = {
    "DatabaseSinkDataSource": "onceflow.spark.database_sink",
    "database_offsets": "onceflow.spark.database_sink",
    "FeedbackLoopWarning": "onceflow.spark.feedback",
    "KafkaSinkDataSource": "onceflow.spark.kafka_sink",
    "OnceflowDataSource": "onceflow.spark.kafka_source",
    "PythonWorkerWarning": "onceflow.spark.workers",
}

__all__ = [
    "DatabaseSinkDataSource",
    "FeedbackLoopWarning",
    "KafkaSinkDataSource",
    "OnceflowDataSource",
    "PythonWorkerWarning",
    "activate",
    "database_offsets",
    "register",
]


def register(spark: Any) -> None:
    """Register every onceflow data source with ``spark`` (a SparkSession).

    Use this rather than ``spark.dataSource.register``: it gives each source a thread-safe
    environment map, without which queries that start together on one source can fail
    (see ``onceflow.spark.registration``). Warns at once (``PythonWorkerWarning``) when
    Spark's local Python workers would not find onceflow.
    """
    from onceflow.spark.database_sink import DatabaseSinkDataSource
    from onceflow.spark.feedback import watch_for_feedback_loops
    from onceflow.spark.kafka_sink import KafkaSinkDataSource
    from onceflow.spark.kafka_source import OnceflowDataSource
    from onceflow.spark.registration import register_data_source
    from onceflow.spark.workers import warn_if_workers_lack_onceflow

    warn_if_workers_lack_onceflow(spark)
    watch_for_feedback_loops(spark)
    for source in (OnceflowDataSource, DatabaseSinkDataSource, KafkaSinkDataSource):
        register_data_source(spark, source)
    activate(spark)


def activate(spark: Any) -> None:
    """Make ``spark`` the active session of the calling thread.

    Spark (4.x) looks a Python data source's name up in the *calling thread's* active
    session only (``DataSource.lookupDataSource``). PySpark makes a session active on the
    thread that creates it; on any other thread (a thread pool that starts queries, a web
    handler) ``format("onceflow")`` fails with ``ClassNotFoundException:
    onceflow.DefaultSource`` until this (or ``spark.createDataFrame``) is called there.
    The same happens on the creating thread when an exception interrupts a py4j call
    (a signal handler's, say): py4j replaces the thread's connection, and with it the JVM
    thread that held the active session.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # Spark Connect: sessions are not per thread
        return
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
