"""The result of an audit: typed, serialisable to JSON, printable as tables."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

MISSING = "missing"
DUPLICATED = "duplicated"
REORDERED = "reordered"
ABORTED_VISIBLE = "aborted_visible"
UNEXPECTED = "unexpected"
UNREADABLE = "unreadable"
WRONG_VALUE = "wrong_value"  # a row of state (a running total) differs from the expected one
KINDS = (MISSING, DUPLICATED, REORDERED, ABORTED_VISIBLE, UNEXPECTED, UNREADABLE, WRONG_VALUE)

REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One finding about one event (or one unreadable record when ``id`` is None).

    ``partition``/``offset`` locate the offending output record (a duplicate's second
    copy, a reordered record, an aborted record); for a table ``offset`` is the row number
    and ``partition`` is None. Missing events have neither.
    """

    kind: str
    sink: str
    id: str | None
    key: str | None
    partition: int | None
    offset: int | None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class InputSummary:
    records: int  # records read from the input (read_committed)
    events: int  # distinct event ids among them
    duplicate_records: int  # records repeating an id already seen (not an output anomaly)
    aborted_events: int  # ids only present in aborted input transactions
    dead_lettered_events: int = 0  # input events found in the dead-letter topic


@dataclass(frozen=True, slots=True)
class SinkSummary:
    name: str
    records: int
    events: int
    counts: dict[str, int]
    dead_lettered: int = 0  # input events not in this sink but in the dead-letter topic


@dataclass(slots=True)
class AuditReport:
    input: InputSummary
    sinks: list[SinkSummary]
    anomalies: list[Anomaly]
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.anomalies

    @property
    def counts(self) -> dict[str, int]:
        """Anomalies per kind, every kind present (zero when none)."""
        found = Counter(anomaly.kind for anomaly in self.anomalies)
        return {kind: found.get(kind, 0) for kind in KINDS}

    def of_kind(self, kind: str, sink: str | None = None) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind and (sink is None or a.sink == sink)]

    def repeated_input_lines(self) -> list[str]:
        """What input records that repeat an id mean for the outputs, in words."""
        if not self.input.duplicate_records:
            return []
        lines = [
            f"{self.input.duplicate_records} input records repeat an id "
            f"({self.input.records} records, {self.input.events} distinct ids): verify "
            "expects each id once in every output, so an output with one row per input "
            "record shows these ids as duplicated"
        ]
        for sink in self.sinks:
            duplicated = self.of_kind(DUPLICATED, sink.name)
            repeated = sum(1 for anomaly in duplicated if "input_copies" in anomaly.detail)
            if repeated:
                lines.append(
                    f"{sink.name}: {repeated} of its {len(duplicated)} duplicated events "
                    "repeat an id in the input"
                )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "ok": self.ok,
            "context": self.context,
            "input": {
                "records": self.input.records,
                "events": self.input.events,
                "duplicate_records": self.input.duplicate_records,
                "aborted_events": self.input.aborted_events,
                "dead_lettered_events": self.input.dead_lettered_events,
            },
            "sinks": [
                {
                    "name": sink.name,
                    "records": sink.records,
                    "events": sink.events,
                    "dead_lettered": sink.dead_lettered,
                    "counts": {kind: sink.counts.get(kind, 0) for kind in KINDS},
                }
                for sink in self.sinks
            ],
            "counts": self.counts,
            "anomalies": [anomaly.to_dict() for anomaly in self.anomalies],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def render(self, console: Any = None, limit: int = 50) -> None:
        """Print a summary table per sink and the first ``limit`` anomalies (rich)."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        summary = Table(
            title=f"onceflow verify: {self.input.events} input events "
            f"({self.input.records} records, {self.input.aborted_events} aborted, "
            f"{self.input.dead_lettered_events} dead-lettered)",
        )
        summary.add_column("sink", overflow="fold")
        summary.add_column("records", justify="right")
        summary.add_column("events", justify="right")
        summary.add_column("dead-lettered", justify="right")
        for kind in KINDS:
            summary.add_column(kind.replace("_", " "), justify="right")
        summary.add_column("result")
        for sink in self.sinks:
            cells = []
            for kind in KINDS:
                count = sink.counts.get(kind, 0)
                cells.append(f"[bold red]{count}[/]" if count else "0")
            bad = any(sink.counts.values())
            summary.add_row(
                sink.name,
                str(sink.records),
                str(sink.events),
                str(sink.dead_lettered),
                *cells,
                "[bold red]FAIL[/]" if bad else "[green]ok[/]",
            )
        input_unreadable = len(self.of_kind(UNREADABLE, "input"))
        if input_unreadable:
            summary.add_row(
                "input",
                str(self.input.records),
                str(self.input.events),
                "",
                *[f"[bold red]{input_unreadable}[/]" if k == UNREADABLE else "0" for k in KINDS],
                "[bold red]FAIL[/]",
            )
        console.print(summary)
        for line in self.repeated_input_lines():
            console.print(line, markup=False)
        if not self.anomalies:
            console.print("[green]no anomalies[/]")
            return
        details = Table(
            title=f"anomalies (first {min(limit, len(self.anomalies))} of {len(self.anomalies)})"
        )
        for column in ("kind", "sink", "id", "key", "partition", "offset", "detail"):
            details.add_column(column, overflow="fold")
        for anomaly in self.anomalies[:limit]:
            details.add_row(
                anomaly.kind,
                anomaly.sink,
                str(anomaly.id),
                str(anomaly.key),
                "" if anomaly.partition is None else str(anomaly.partition),
                "" if anomaly.offset is None else str(anomaly.offset),
                json.dumps(anomaly.detail, sort_keys=True) if anomaly.detail else "",
            )
        console.print(details)
