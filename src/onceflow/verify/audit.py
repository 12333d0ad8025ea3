"""Audit a pipeline's outputs against its input events (pure logic, no I/O).

The input is the list of events read from the input topic with ``read_committed``, each
with an id, a key and its (partition, offset). Each output (a database table, an output
topic) is a ``Sink``: the records it holds, in the order the sink defines (offset order
per partition for a topic, query order for a table). For every sink, every input event
must appear exactly once, must not come from an aborted transaction, and the events of one
key must keep the order they had in their input partition. An event found in the
dead-letter topic is accounted for: not missing, and counted as dead-lettered.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from onceflow.verify.report import (
    ABORTED_VISIBLE,
    DUPLICATED,
    MISSING,
    REORDERED,
    UNEXPECTED,
    UNREADABLE,
    Anomaly,
    AuditReport,
    InputSummary,
    SinkSummary,
)


@dataclass(frozen=True, slots=True)
class InputEvent:
    """One record of an input topic (read_committed)."""

    id: str
    key: str | None
    partition: int
    offset: int
    topic: str | None = None  # set when several input topics are audited together


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One output: a row of a table or a record of an output topic.

    ``position`` orders records within the sink (the offset for a topic, the row number
    for a table); ``partition`` is the topic partition (None for table rows), and records
    are compared for order only within one partition. ``aborted`` is True when the record
    is known to belong to an aborted transaction (from the log's control markers or from a
    marker field the writer set).
    """

    id: str
    key: str | None
    position: int
    partition: int | None = None
    aborted: bool = False


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record whose id could not be extracted."""

    sink: str  # the sink name, or "input"
    reason: str
    partition: int | None = None
    offset: int | None = None


@dataclass(slots=True)
class Sink:
    name: str
    records: list[OutputRecord] = field(default_factory=list)
    check_order: bool = True
    unreadable: list[Unreadable] = field(default_factory=list)


def audit(
    inputs: Iterable[InputEvent],
    sinks: Iterable[Sink],
    *,
    aborted_input_ids: Iterable[str] = (),
    input_unreadable: Iterable[Unreadable] = (),
    input_aborted_visible: Iterable[InputEvent] = (),
    dead_lettered_ids: Iterable[str] = (),
    context: Mapping[str, object] | None = None,
) -> AuditReport:
    """Compare each sink with the input events; return every anomaly found.

    Events in ``dead_lettered_ids`` (read from the dead-letter topic) are not missing
    from a sink that lacks them; they are counted as dead-lettered instead.
    """
    first: dict[str, InputEvent] = {}
    input_copies: Counter[str] = Counter()
    for event in inputs:
        input_copies[event.id] += 1
        first.setdefault(event.id, event)
    input_records = input_copies.total()
    aborted_inputs = set(aborted_input_ids) - first.keys()
    dead_lettered = set(dead_lettered_ids) & first.keys()
    anomalies: list[Anomaly] = [
        Anomaly(UNREADABLE, u.sink, None, None, u.partition, u.offset, {"reason": u.reason})
        for u in input_unreadable
    ]
    for event in input_aborted_visible:  # the input's own read_committed view is wrong
        aborted_inputs.add(event.id)
        anomalies.append(
            Anomaly(
                ABORTED_VISIBLE,
                "input",
                event.id,
                event.key,
                event.partition,
                event.offset,
                {"source": "input transaction aborted"},
            )
        )
    summaries = []
    for sink in sinks:
        found = _audit_sink(sink, first, aborted_inputs, dead_lettered, input_copies)
        anomalies.extend(found)
        events = {record.id for record in sink.records}
        summaries.append(
            SinkSummary(
                name=sink.name,
                records=len(sink.records),
                events=len(events),
                counts=dict(Counter(anomaly.kind for anomaly in found)),
                dead_lettered=len(dead_lettered - events),
            )
        )
    return AuditReport(
        input=InputSummary(
            records=input_records,
            events=len(first),
            duplicate_records=input_records - len(first),
            aborted_events=len(aborted_inputs),
            dead_lettered_events=len(dead_lettered),
        ),
        sinks=summaries,
        anomalies=anomalies,
        context=dict(context or {}),
    )


def _audit_sink(
    sink: Sink,
    inputs: dict[str, InputEvent],
    aborted_inputs: set[str],
    dead_lettered: set[str] = frozenset(),  # type: ignore[assignment]
    input_copies: Mapping[str, int] | None = None,
) -> list[Anomaly]:
    name = sink.name
    anomalies = [
        Anomaly(UNREADABLE, name, None, None, u.partition, u.offset, {"reason": u.reason})
        for u in sink.unreadable
    ]
    delivered: dict[str, list[OutputRecord]] = defaultdict(list)
    for record in sink.records:
        event = inputs.get(record.id)
        key = event.key if event is not None else record.key
        if record.aborted:
            anomalies.append(
                Anomaly(
                    ABORTED_VISIBLE,
                    name,
                    record.id,
                    key,
                    record.partition,
                    record.position,
                    {"source": "output transaction aborted"},
                )
            )
        elif event is None:
            kind = ABORTED_VISIBLE if record.id in aborted_inputs else UNEXPECTED
            detail = {"source": "input transaction aborted"} if kind == ABORTED_VISIBLE else {}
            anomalies.append(
                Anomaly(kind, name, record.id, key, record.partition, record.position, detail)
            )
        else:
            delivered[record.id].append(record)

    for event_id, event in inputs.items():
        copies = delivered.get(event_id)
        if not copies and event_id in dead_lettered:
            continue
        if not copies:
            detail: dict[str, object] = {
                "input_partition": event.partition,
                "input_offset": event.offset,
            }
            if event.topic is not None:
                detail["input_topic"] = event.topic
            anomalies.append(
                Anomaly(
                    MISSING,
                    name,
                    event_id,
                    event.key,
                    None,
                    None,
                    detail,
                )
            )
        elif len(copies) > 1:
            detail = {
                "copies": len(copies),
                "positions": [[c.partition, c.position] for c in copies],
            }
            repeated = (input_copies or {}).get(event_id, 1)
            if repeated > 1:  # the input itself holds the id more than once
                detail["input_copies"] = repeated
            anomalies.append(
                Anomaly(
                    DUPLICATED,
                    name,
                    event_id,
                    event.key,
                    copies[1].partition,
                    copies[1].position,
                    detail,
                )
            )
    if sink.check_order:
        anomalies.extend(_reordered(sink, inputs, delivered))
    return anomalies


def _reordered(
    sink: Sink, inputs: dict[str, InputEvent], delivered: dict[str, list[OutputRecord]]
) -> list[Anomaly]:
    """Events of one key whose first output copy comes before an event that preceded them.

    Order is compared only where it is defined: between events of the same key from the
    same input partition, within one output partition (or one table).
    """
    groups: dict[tuple[str | None, int | None], list[OutputRecord]] = defaultdict(list)
    for event_id, copies in delivered.items():
        event = inputs[event_id]
        if event.key is None:
            continue
        first_copy = min(copies, key=lambda c: c.position)
        groups[(event.key, first_copy.partition)].append(first_copy)
    anomalies = []
    for (key, _out_partition), records in groups.items():
        records.sort(key=lambda r: r.position)
        latest: dict[tuple[str | None, int], InputEvent] = {}  # input partition -> latest
        for record in records:
            event = inputs[record.id]
            where = (event.topic, event.partition)
            before = latest.get(where)
            if before is not None and before.offset > event.offset:
                anomalies.append(
                    Anomaly(
                        REORDERED,
                        sink.name,
                        record.id,
                        key,
                        record.partition,
                        record.position,
                        {
                            "input_offset": event.offset,
                            "after_id": before.id,
                            "after_input_offset": before.offset,
                        },
                    )
                )
            else:
                latest[where] = event
    return anomalies


def first_copies(sink: Sink) -> tuple[Sink, int]:
    """The sink as a consumer's inbox sees it: later copies of an event dropped."""
    seen: set[str] = set()
    kept = []
    for record in sink.records:
        if record.id not in seen:
            seen.add(record.id)
            kept.append(record)
    return Sink(sink.name, kept, sink.check_order, sink.unreadable), len(sink.records) - len(kept)
