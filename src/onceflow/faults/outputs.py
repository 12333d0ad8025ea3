"""What a pipeline writes: ``table:NAME`` (a table of its database) or ``topic:NAME`` (read
read_committed)."""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("table", "topic")


class OutputError(ValueError):
    """An output that is not ``table:NAME`` or ``topic:NAME``."""


@dataclass(frozen=True, slots=True)
class Output:
    kind: str
    name: str

    @classmethod
    def parse(cls, text: str) -> Output:
        kind, _, name = text.partition(":")
        if kind not in KINDS or not name:
            raise OutputError(f"bad output {text!r}: expected table:NAME or topic:NAME")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"
