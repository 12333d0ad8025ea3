"""``Record.from_message``: the Runner's record reads its fields from the consumed message
when the handler asks for them, and shows the same fields as a Record made whole."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.patterns.records import MessageRecord, Record


@dataclass
class FakeMessage:  # the confluent_kafka.Message methods a record reads
    _headers: list[tuple[str, bytes | None]] | None
    _timestamp: tuple[int, int]
    reads: int = 0

    def topic(self) -> str:
        self.reads += 1
        return "orders"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 41

    def key(self) -> bytes:
        return b"k1"

    def value(self) -> bytes:
        return b'{"n": 1}'

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp


def test_a_message_record_shows_the_fields_of_its_message():
    message = FakeMessage([("event-id", b"e1")], (1, 1_700_000_000_000))
    record = Record.from_message(message, {"n": 1})
    assert isinstance(record, MessageRecord) and isinstance(record, Record)
    whole = Record("orders", 2, 41, b"k1", b'{"n": 1}', {"n": 1}, [("event-id", b"e1")],
                   1_700_000_000_000)  # fmt: skip
    fields = ("topic", "partition", "offset", "key", "raw_value", "value", "headers",
              "timestamp_ms")  # fmt: skip
    assert {f: getattr(record, f) for f in fields} == {f: getattr(whole, f) for f in fields}
    assert record.header("event-id") == b"e1" and record.source == "orders/2/41"
    assert "topic='orders'" in repr(record)


def test_fields_are_read_when_asked_and_missing_ones_are_empty():
    message = FakeMessage(None, (0, -1))  # no headers, no timestamp
    record = Record.from_message(message, None)
    assert message.reads == 0
    assert record.topic == "orders" and message.reads == 1
    assert record.headers == [] and record.header("event-id") is None
    assert record.timestamp_ms is None and record.value is None
