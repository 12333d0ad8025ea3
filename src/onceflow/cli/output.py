"""Printing results: tables that never cut a value, or JSON.

On a terminal a table fits the window by wrapping long values over several lines; into a
pipe or a file it is as wide as its widest values, so nothing is cut or wrapped.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

UNBOUNDED_WIDTH = 1_000_000
Row = TypeVar("Row")


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH, soft_wrap=True)


def table(*columns: str, title: str | None = None) -> Table:
    grid = Table(title=title)
    for column in columns:
        grid.add_column(column, overflow="fold")
    return grid


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    grid = table(*columns)
    for row in rows:
        grid.add_row(*("-" if cell is None or cell == "" else str(cell) for cell in row))
    console().print(grid)


def print_rows(
    rows: Sequence[Row],
    as_json: bool,
    columns: Sequence[str],
    cells: Callable[[Row], Sequence[Any]],
) -> None:
    """``rows`` as JSON, or as a table with a row of ``cells(row)`` each."""
    if as_json:
        print_json(rows)
    else:
        print_table(columns, [cells(row) for row in rows])


def to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return to_plain(value.to_dict())
        return to_plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [to_plain(v) for v in value]
    return value


def print_json(value: Any) -> None:
    """``value`` (dataclasses, lists, dicts) as indented JSON on stdout."""
    sys.stdout.write(json.dumps(to_plain(value), indent=2) + "\n")
