"""The classic group and offset requests as the group coordinator takes them (decoded
from the wire by the handlers, independent of the request version)."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.coordinator.group_metadata import TopicPartition

# (offset, leader epoch, metadata) per topic-partition, as requests carry them
OffsetRequest = dict[TopicPartition, tuple[int, int, str | None]]


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394)
    reason: str | None = None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def why(self) -> str:
        return self.reason or "joining"


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    offsets: OffsetRequest
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    group_id: str
    producer_id: int
    producer_epoch: int
    member_id: str
    generation_id: int
    group_instance_id: str | None
    offsets: OffsetRequest
