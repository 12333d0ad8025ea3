"""What a Jepsen-style run records: every transaction, every read, the final read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

COMMITTED = "committed"
ABORTED = "aborted"
INDETERMINATE = "indeterminate"


@dataclass(slots=True)
class Txn:
    producer: str
    index: int
    writes: list[tuple[int, str]]  # (partition, value) in production order
    outcome: str = INDETERMINATE
    started: float = 0.0
    ended: float = 0.0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Read:
    consumer: str
    partition: int
    offset: int
    value: str
    at: float = 0.0


@dataclass(slots=True)
class History:
    txns: list[Txn] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    final: list[Read] = field(default_factory=list)  # consumer "final"
    final_complete: bool = True  # False: LSO never reached the high watermark
    events: list[dict[str, Any]] = field(default_factory=list)  # kills, restarts, errors

    def save(self, path: Path) -> None:
        """One JSON object per line: txns, reads, final records, events."""
        with open(path, "w") as out:
            for kind, items in (
                ("txn", self.txns),
                ("read", self.reads),
                ("final", self.final),
            ):
                for item in items:
                    out.write(json.dumps({"type": kind, **asdict(item)}) + "\n")
            for event in self.events:
                out.write(json.dumps({"type": "event", **event}) + "\n")
            out.write(json.dumps({"type": "final_complete", "value": self.final_complete}))
            out.write("\n")
