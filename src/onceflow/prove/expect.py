"""Outputs that are not one record per event: what they must hold, computed from the input.

``--expect MODULE:FUNCTION`` names a function that gets the input's JSON values (a list
of dicts, in the order they were written) and returns ``{"table:NAME": rows}``: the rows
the table must hold once every input event was processed exactly once, each row a dict of
column -> value. A row's first column is its key (``store`` in
``{"store": "s1", "revenue": 120, "orders": 3}``). After each trial the table's rows are
compared with them: a key the table lacks is missing, a key it holds twice is duplicated,
a key with other values is a wrong value (running totals that counted a batch twice), and
a key nobody expected is unexpected. Tables named here are audited only this way; the
other outputs keep the id mapping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceflow.db import quote_identifier
from onceflow.prove.database import TrialDatabase
from onceflow.prove.errors import ProveError
from onceflow.prove.outputs import Output
from onceflow.verify.report import (
    DUPLICATED,
    MISSING,
    UNEXPECTED,
    WRONG_VALUE,
    Anomaly,
    SinkSummary,
)

ExpectFunction = Callable[[list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]


@dataclass(frozen=True, slots=True)
class Expectation:
    output: Output
    rows: list[dict[str, Any]]

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(column for row in self.rows for column in row))

    def progress(self, records: int) -> tuple[str, float] | None:
        """How a table of state shows progress to the kill watcher, which counts output
        records: the SQL sum of its numeric columns and the factor that turns it into
        "input records counted so far" (the expected sum stands for all ``records``).
        None when no column is numeric."""
        others = self.columns[1:]  # not the key column
        numeric = [c for c in others if all(isinstance(r.get(c), int | float) for r in self.rows)]
        expected = sum(r[c] for r in self.rows for c in numeric)
        if not numeric or expected <= 0:
            return None
        total = " + ".join(f"coalesce(sum({quote_identifier(c)}), 0)" for c in numeric)
        return total, records / expected

    def compare(self, actual: list[dict[str, Any]]) -> list[Anomaly]:
        """Every difference between the table's rows and the expected ones."""
        sink = str(self.output)
        key_column = self.columns[0]
        found: dict[Any, list[dict[str, Any]]] = {}
        for row in actual:
            found.setdefault(row[key_column], []).append(row)
        anomalies = []
        for number, expected in enumerate(self.rows):
            key = expected[key_column]
            rows = found.pop(key, [])
            if not rows:
                anomalies.append(Anomaly(MISSING, sink, str(key), str(key), None, None,
                                         {"expected": expected}))  # fmt: skip
            elif len(rows) > 1:
                anomalies.append(Anomaly(DUPLICATED, sink, str(key), str(key), None, number,
                                         {"copies": len(rows), "rows": rows}))  # fmt: skip
            elif wrong := {c: v for c, v in expected.items() if rows[0].get(c) != v}:
                anomalies.append(Anomaly(
                    WRONG_VALUE, sink, str(key), str(key), None, number,
                    {"expected": wrong, "actual": {c: rows[0].get(c) for c in wrong}},
                ))  # fmt: skip
        for key, rows in found.items():
            anomalies.append(Anomaly(UNEXPECTED, sink, str(key), str(key), None, None,
                                     {"rows": rows}))  # fmt: skip
        return anomalies

    def summary(self, actual: list[dict[str, Any]], anomalies: list[Anomaly]) -> SinkSummary:
        counts = dict(Counter(anomaly.kind for anomaly in anomalies))
        keys = {row[self.columns[0]] for row in actual}
        return SinkSummary(str(self.output), len(actual), len(keys), counts)


def expectations(
    function: ExpectFunction, values: list[dict[str, Any]], outputs: list[Output]
) -> list[Expectation]:
    """Call the user's function once; check that it names declared table outputs."""
    try:
        result = function(values)
    except Exception as error:  # the user's function: one line, theirs to read
        raise ProveError(f"the expect function failed: {type(error).__name__}: {error}") from None
    if not isinstance(result, dict) or not result:
        raise ProveError("the expect function must return {'table:NAME': [row, ...]}")
    declared = {str(output): output for output in outputs}
    found = []
    for name, rows in result.items():
        output = declared.get(name)
        if output is None or output.kind != "table":
            raise ProveError(f"the expect function names {name!r}, which is not a declared "
                             f"table output ({', '.join(declared) or 'none'})")  # fmt: skip
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
            raise ProveError(f"the expect function's rows for {name} must be a non-empty "
                             "list of dicts (column -> value)")  # fmt: skip
        found.append(Expectation(output, rows))
    return found


def read_rows(
    database: TrialDatabase | None, expectation: Expectation
) -> list[dict[str, Any]] | None:
    """The table's rows (the expected columns only); None when the table (or the
    database) does not exist."""
    if database is None:
        return None
    columns, table = expectation.columns, expectation.output.name
    try:
        present = database.columns(table)
        if present is None:
            return None
        absent = [column for column in columns if column not in present]
        if absent:  # SQLite would read a quoted unknown column as a string
            raise ProveError(f"output {expectation.output} has no column {absent[0]!r} "
                             f"(it has {', '.join(present)})")  # fmt: skip
        return database.select(table, columns)
    except ProveError:
        raise
    except Exception as error:  # sqlite3.Error, psycopg.Error
        if "unable to open" in str(error):
            return None
        raise ProveError(f"output {expectation.output} cannot be read: {error}") from None
