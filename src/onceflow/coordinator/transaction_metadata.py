"""One transactional id's state, as the transaction coordinator keeps it and stores it in
``__transaction_state`` (one JSON record per transactional id)."""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field


class TxnState(enum.StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"


PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_epoch: int = -1  # set when the coordinator itself bumped the epoch
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    next_producer_id: int = -1  # transactions v2: the id the producer moves to on completion
    busy: bool = False  # a state transition is being written

    def copy(self) -> TransactionMetadata:
        return dataclasses.replace(self, partitions=set(self.partitions))

    def restore(self, before: TransactionMetadata) -> None:
        """Undo a transition that could not be made durable (busy is left as it is)."""
        for item in dataclasses.fields(self):
            if item.name != "busy":
                value = getattr(before, item.name)
                setattr(self, item.name, set(value) if isinstance(value, set) else value)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "last_producer_epoch": self.last_producer_epoch,
                "timeout_ms": self.timeout_ms,
                "state": self.state.value,
                "partitions": sorted(self.partitions),
                "start_ms": self.start_ms,
                "update_ms": self.update_ms,
                "next_producer_id": self.next_producer_id,
            }
        ).encode()

    @classmethod
    def from_json(cls, transactional_id: str, data: bytes) -> TransactionMetadata:
        value = json.loads(data)
        return cls(
            transactional_id,
            value["producer_id"],
            value["producer_epoch"],
            value["timeout_ms"],
            TxnState(value["state"]),
            value["last_producer_epoch"],
            {(topic, partition) for topic, partition in value["partitions"]},
            value["start_ms"],
            value["update_ms"],
            value.get("next_producer_id", -1),
        )
