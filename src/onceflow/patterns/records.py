"""What a handler sees: a consumed record with its value decoded, and the decoders."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

Decoder = Callable[[bytes | None], Any]
DLQ_ERROR_HEADER = "onceflow-error"
DLQ_SOURCE_HEADER = "onceflow-source"
EVENT_ID_HEADERS = ("event-id", "onceflow-outbox-id")


class DecodeError(ValueError):
    """The record's value cannot be decoded (a poison record): it goes to the DLQ."""


def json_decoder(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise DecodeError(f"value is not JSON: {error}") from None


# Not frozen: a frozen dataclass sets each of its 8 fields through object.__setattr__,
# 1.2 us per record, a seventh of the Runner's own work per record (benchmarks/README.md).
@dataclass(slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    raw_value: bytes | None
    value: Any
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_ms: int | None = None

    @staticmethod
    def from_message(message: Message, value: Any) -> Record:
        """The record of a consumed message (its fields read from it when asked)."""
        record = _new(MessageRecord)
        record._message = message
        record.value = value
        return record

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def source(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


class MessageRecord(Record):
    """A Record that reads its fields from the consumed message when the handler asks for
    them, the Runner's: filling a Record's 8 fields from the message cost 1.4 us per
    record, a fifth of the Runner's own work per record, against 0.3 us for this and
    0.1 us per field read (benchmarks/README.md). ``headers`` is a new list per read."""

    __slots__ = ("_message",)
    _message: Message

    topic = property(lambda self: self._message.topic())
    partition = property(lambda self: self._message.partition())
    offset = property(lambda self: self._message.offset())
    key = property(lambda self: self._message.key())
    raw_value = property(lambda self: self._message.value())
    headers = property(lambda self: self._message.headers() or [])

    @property
    def timestamp_ms(self) -> int | None:
        timestamp_type, timestamp = self._message.timestamp()
        return timestamp if timestamp_type else None


_new = object.__new__


def default_event_id(message: Message) -> str:
    """The ``event-id`` (or outbox id) header when present, else topic/partition/offset."""
    for name, value in message.headers() or []:
        if name in EVENT_ID_HEADERS and value is not None:
            return f"{name}:{value.decode(errors='backslashreplace')}"
    return f"{message.topic()}/{message.partition()}/{message.offset()}"


def dead_letter_headers(message: Message, error: BaseException) -> list[tuple[str, bytes]]:
    headers = [(k, v) for k, v in (message.headers() or []) if v is not None]
    headers.append((DLQ_ERROR_HEADER, f"{type(error).__name__}: {error}".encode()[:4000]))
    headers.append(
        (DLQ_SOURCE_HEADER, f"{message.topic()}/{message.partition()}/{message.offset()}".encode())
    )
    return headers
