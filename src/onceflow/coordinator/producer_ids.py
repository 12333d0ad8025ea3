"""Producer id allocation that never hands out an id twice, even after a crash.

Ids are reserved in blocks: the end of the current block is made durable before any id in
it is used, so a restarted broker continues after the block.
"""

from __future__ import annotations

import json
from pathlib import Path

from onceflow.log.durability import write_atomically

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "producer_ids.json"
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        """Continue after the block reserved last (before any id is handed out)."""
        if self.path.exists():
            self._next = self._block_end = json.loads(self.path.read_text())["block_end"]

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve(self, block_end: int) -> None:
        write_atomically(self.path, json.dumps({"block_end": block_end}).encode())
        self._block_end = block_end
