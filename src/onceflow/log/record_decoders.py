"""How ``onceflow log dump`` shows a record's key and value.

A decoder turns one record into the text printed after ``key:`` and ``payload:`` (None
leaves the field out, as Kafka's ``kafka-dump-log.sh`` does for a null key or value).

* ``decode_as_text``: UTF-8 text (Kafka's default StringDecoder); bytes that are not UTF-8
  are shown as ``\\xNN`` escapes.

The decoders of the coordinators' internal topics live with the coordinators
(:mod:`onceflow.coordinator.internal_record_decoders`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

RecordDecoder = Callable[[int, bytes | None, bytes | None], tuple[str | None, str | None]]


def as_text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def decode_as_text(
    _offset: int, key: bytes | None, value: bytes | None
) -> tuple[str | None, str | None]:
    return as_text(key), as_text(value)
