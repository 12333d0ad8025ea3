"""Record batches the scenarios send: fixed timestamps (one millisecond apart), so both
brokers store the same bytes but for the producer id. Encoded and decoded by
``tests.kit.batches``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.kit.batches import record_batch

BASE_TIME_MS = 1_700_000_000_000  # every record's timestamp, unless a step gives its own


@dataclass(frozen=True)
class Batch:
    """A v2 batch; ``producer`` names the client whose producer id and epoch it carries
    (resolved on each broker from what that broker answered), or None."""

    values: tuple[bytes | None, ...]
    producer: str | None = None
    sequence: int = -1
    transactional: bool = False
    timestamp_ms: int = BASE_TIME_MS
    keys: tuple[bytes | None, ...] | None = None
    epoch_offset: int = 0  # add to the producer's epoch (a stale or future epoch)
    headers: tuple[tuple[bytes, bytes | None], ...] = field(default=())

    def encode(self, variables: dict[str, Any]) -> bytes:
        pid, epoch = -1, -1
        if self.producer is not None:
            pid = variables.get(f"{self.producer}.pid", -1)
            epoch = variables.get(f"{self.producer}.epoch", -1) + self.epoch_offset
        return record_batch(
            list(self.values),
            pid,
            epoch,
            self.sequence,
            timestamp_ms=self.timestamp_ms,
            keys=list(self.keys) if self.keys else None,
            transactional=self.transactional,
            headers=self.headers,
            timestamp_step_ms=1,
        )
