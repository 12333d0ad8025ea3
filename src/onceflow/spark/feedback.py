"""Warn when an ``onceflow-kafka`` sink writes to a topic its own query reads.

Such a query reads back everything it writes, and writes it again: a loop that grows
until the disk is full. Nothing in the sink or the source can see the other (each runs in
its own Python worker), so a StreamingQueryListener in the user's process looks at the
query's plan once, at its first progress, through Spark's JVM objects. Any change in
those internals makes the check skip silently; it never affects the query.

Spark calls a Python listener for every event of every query: each micro-batch's progress,
and each trigger that found no data. PySpark's own bridge turns every event into Python
objects first, some 60 py4j round trips for one progress event, which took a fifth of a
core on Spark's listener thread and more in the driver's Python process in a two-query
job on 2 cores. This listener's bridge (``_FirstProgressBridge``) asks the JVM for the
query's id alone, and nothing for the other events.

The listener is removed again when the interpreter exits. Spark calls a Python listener
through py4j's callback server, which is gone once the Python process has ended; a script
that ends without ``spark.stop()`` leaves the JVM to stop the session in its shutdown
hook, and its listener bus would then deliver the queries' last events (progress,
termination) to the departed listener: an ``ERROR StreamingQueryListenerBus: Listener
PythonStreamingQueryListenerWrapper threw an exception`` with some 60 lines of Java
traces after a job that succeeded.
"""

from __future__ import annotations

import atexit
import logging
import warnings
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from onceflow.spark.common import lower_case_options
from onceflow.spark.kafka_source.options import parse_options

log = logging.getLogger(__name__)


class FeedbackLoopWarning(UserWarning):
    """A query's onceflow-kafka sink writes to one of the topics its source reads."""


def _options(java_map: Any) -> dict[str, str]:
    return lower_case_options({k: java_map.get(k) for k in java_map.keySet().toArray()})


def _reads(options: dict[str, str], topic: str) -> bool:
    return parse_options(options, batch=None).subscription.matches(topic)


def feedback_topics(plan: Any) -> list[str]:
    """Topics the plan's onceflow-kafka sink writes that its onceflow sources read."""
    if plan.getClass().getSimpleName() != "WriteToMicroBatchDataSource":
        return []
    if str(plan.table().name()) != "onceflow-kafka":
        return []
    option = plan.writeOptions().get("topic")
    if option.isEmpty():
        return []
    topic = str(option.get())
    leaves = plan.collectLeaves()
    found = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        relation = getattr(leaf, "relation", None)
        if relation is None or str(relation().table().name()) != "onceflow":
            continue
        if _reads(_options(relation().options()), topic):
            found.append(topic)
    return found


class FeedbackLoopListener(StreamingQueryListener):
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.checked: set[str] = set()

    @property
    def _jlistener(self) -> Any:
        """What the JVM calls (PySpark's property, with this module's lean bridge)."""
        from pyspark import SparkContext

        if getattr(self, "_jlistenerobj", None) is None:
            streaming = SparkContext._jvm.org.apache.spark.sql.streaming  # type: ignore[union-attr]
            bridge = _FirstProgressBridge(self)
            self._jlistenerobj = streaming.PythonStreamingQueryListenerWrapper(bridge)
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.first_progress(str(event.progress.id))

    def first_progress(self, query_id: str) -> None:
        """Check query ``query_id``'s plan, once."""
        if query_id in self.checked:
            return
        self.checked.add(query_id)
        try:
            query = self.spark.streams.get(query_id)
            plan = query._jsq.streamingQuery().logicalPlan()
            topics = feedback_topics(plan)
            name = query.name if topics else None
        except Exception as error:  # internals differ: skip the check, never the query
            log.debug("feedback-loop check skipped: %s", error)
            return
        for topic in topics:
            message = (
                f"query {name or query_id}: the onceflow-kafka sink writes to "
                f"topic {topic!r}, which the query's onceflow source also reads; every "
                "record written will be read and written again"
            )
            log.warning("%s", message)
            warnings.warn(message, FeedbackLoopWarning, stacklevel=2)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


class _FirstProgressBridge:
    """The JVM's side of the listener: a progress event costs three py4j calls (its
    query's id), the other events none."""

    def __init__(self, listener: FeedbackLoopListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        self.listener.first_progress(jevent.progress().id().toString())

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def watch_for_feedback_loops(spark: Any) -> None:
    """Install the listener once per SparkSession (classic PySpark only)."""
    if getattr(spark, "_jsparkSession", None) is None or getattr(
        spark, "_onceflow_feedback_listener", None
    ):
        return
    listener = FeedbackLoopListener(spark)
    spark.streams.addListener(listener)
    spark._onceflow_feedback_listener = listener
    atexit.register(_remove_at_exit, spark, listener)


# How long the exit waits for Spark's listener bus to deliver the events already posted
# (to every listener, the user's Python listeners included) while Python still answers.
_DRAIN_AT_EXIT_MS = 10_000


def _remove_at_exit(spark: Any, listener: FeedbackLoopListener) -> None:
    """Remove the listener while Python can still answer the JVM (see the module's doc)."""
    context = spark.sparkContext
    if getattr(context, "_jsc", None) is None:
        return  # spark.stop() ran: the listener bus stopped with the session
    try:
        spark.streams.removeListener(listener)
        # An event the bus took up before the removal is delivered now, not after exit.
        context._jsc.sc().listenerBus().waitUntilEmpty(_DRAIN_AT_EXIT_MS)
    except Exception as error:  # the JVM is already going away: nothing left to protect
        log.debug("removing the feedback-loop listener at exit: %s", error)
