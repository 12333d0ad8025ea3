"""The feedback-loop listener's bridge asks the JVM for a progress event's query id alone,
and checks each query's plan once."""

from __future__ import annotations

from onceflow.spark.feedback import FeedbackLoopListener, _FirstProgressBridge


class JavaCalls:
    """A py4j object stand-in that counts the calls made through it."""

    def __init__(self, calls: list[str], value: str = "") -> None:
        self.calls = calls
        self.value = value

    def progress(self) -> JavaCalls:
        self.calls.append("progress")
        return self

    def id(self) -> JavaCalls:
        self.calls.append("id")
        return self

    def toString(self) -> str:
        self.calls.append("toString")
        return self.value


class Streams:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def get(self, query_id: str) -> None:
        self.asked.append(query_id)
        raise LookupError("no such query here")  # the check is skipped, never raised


class Session:
    def __init__(self) -> None:
        self.streams = Streams()


def test_a_progress_event_costs_three_calls_and_each_query_is_checked_once() -> None:
    session = Session()
    bridge = _FirstProgressBridge(FeedbackLoopListener(session))
    calls: list[str] = []
    for query_id in ("q1", "q1", "q2", "q1"):
        bridge.onQueryProgress(JavaCalls(calls, query_id))
    assert calls == ["progress", "id", "toString"] * 4
    assert session.streams.asked == ["q1", "q2"]


def test_the_other_events_cost_no_call() -> None:
    bridge = _FirstProgressBridge(FeedbackLoopListener(Session()))
    calls: list[str] = []
    for method in (bridge.onQueryStarted, bridge.onQueryIdle, bridge.onQueryTerminated):
        method(JavaCalls(calls))
    assert calls == []
