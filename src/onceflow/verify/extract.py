"""Pull an event id and key out of a Kafka record or a database row.

A field spec names where the value lives:

* ``order_id`` or ``payload.order_id`` — a field (dotted path) of the JSON value;
* ``key:`` — the whole record key as text; ``key:store`` — a field of a JSON key;
* ``value:`` — the whole record value as text; ``value:order_id`` is the same as
  ``order_id``.

For database rows the spec is a column name, optionally followed by a dotted path into a
JSON text column (``payload.order_id``). Values are compared as text: JSON ``7`` and SQL
``'7'`` are the same id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ExtractError(ValueError):
    """The field is absent or the payload is not the JSON the spec expects."""


class FieldMissing(ExtractError):
    """The JSON document has no such field (a mistyped field spec, if no record has it)."""


@dataclass(frozen=True, slots=True)
class FieldSpec:
    part: str  # "key" or "value"
    path: tuple[str, ...]  # empty: the whole part as text

    @classmethod
    def parse(cls, spec: str) -> FieldSpec:
        part = "value"
        rest = spec
        for prefix in ("key:", "value:"):
            if spec.startswith(prefix):
                part, rest = prefix[:-1], spec[len(prefix) :]
                break
        path = tuple(rest.split(".")) if rest else ()
        if any(not element for element in path):
            raise ValueError(f"bad field spec {spec!r}")
        return cls(part, path)

    def __str__(self) -> str:
        return f"{self.part}:{'.'.join(self.path)}"


def as_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="backslashreplace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _walk(document: Any, path: tuple[str, ...], spec: str) -> Any:
    for name in path:
        if not isinstance(document, Mapping) or name not in document:
            raise FieldMissing(f"field {spec!r} not found")
        document = document[name]
    if document is None:
        raise ExtractError(f"field {spec!r} is null")
    return document


def _row_spec(spec: str) -> tuple[str, list[str]]:
    """(column, path into its JSON) of a field spec applied to a row."""
    for prefix in ("key:", "value:"):  # a message spec reused for rows: the column
        spec = spec.removeprefix(prefix)
    column, *path = spec.split(".")
    return column, path


class Extractor:
    """Extract (id, key) pairs; ``key_spec`` None means events have no key."""

    def __init__(self, id_spec: str, key_spec: str | None = None) -> None:
        self.id_spec = id_spec
        self.key_spec = key_spec
        self._id = FieldSpec.parse(id_spec)
        self._key = FieldSpec.parse(key_spec) if key_spec else None

    def _message_field(
        self, spec: FieldSpec, raw: dict[str, bytes | None], parsed: dict[str, Any]
    ) -> str:
        data = raw[spec.part]
        if data is None:
            raise ExtractError(f"record {spec.part} is null")
        if not spec.path:
            return as_text(data)
        if spec.part not in parsed:
            try:
                parsed[spec.part] = json.loads(data)
            except (ValueError, UnicodeDecodeError) as error:
                raise ExtractError(f"record {spec.part} is not JSON: {error}") from None
        return as_text(_walk(parsed[spec.part], spec.path, str(spec)))

    def message(self, key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
        raw = {"key": key, "value": value}
        parsed: dict[str, Any] = {}
        event_id = self._message_field(self._id, raw, parsed)
        event_key = None if self._key is None else self._message_field(self._key, raw, parsed)
        return event_id, event_key

    def flag(self, spec: FieldSpec, key: bytes | None, value: bytes | None) -> bool:
        """Whether a marker field is present and truthy (not false, 0, "" or null)."""
        try:
            text = self._message_field(spec, {"key": key, "value": value}, {})
        except ExtractError:
            return False
        return text not in ("", "false", "0", "null")

    @property
    def id_column(self) -> str:
        """The column of a row that holds the id."""
        return _row_spec(self.id_spec)[0]

    @property
    def key_column(self) -> str | None:
        """The column of a row that holds the key (None: events have no key)."""
        return None if self.key_spec is None else _row_spec(self.key_spec)[0]

    def _row_field(self, spec: str, row: Mapping[str, Any]) -> str:
        column, path = _row_spec(spec)
        spec = ".".join((column, *path))
        if column not in row:
            raise ExtractError(f"column {column!r} not in result ({', '.join(row)})")
        value = row[column]
        if path:
            if isinstance(value, str | bytes):
                try:
                    value = json.loads(value)
                except ValueError as error:
                    raise ExtractError(f"column {column!r} is not JSON: {error}") from None
            value = _walk(value, tuple(path), spec)
        if value is None:
            raise ExtractError(f"column {spec!r} is null")
        return as_text(value)

    def row(self, row: Mapping[str, Any]) -> tuple[str, str | None]:
        event_id = self._row_field(self.id_spec, row)
        event_key = None if self.key_spec is None else self._row_field(self.key_spec, row)
        return event_id, event_key
