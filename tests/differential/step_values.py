"""What step bodies carry besides literals, resolved on each broker when the step is
sent: the admin client's name, the placeholders for what a broker handed out (producer id
and epoch, member id and generation, a topic's id), the consumer protocol's subscription
and assignment bytes, and the committed-offset topics of OffsetCommit and TxnOffsetCommit.

The step builders are in topic_steps, record_steps, txn_steps and group_steps; scenarios
import this module as ``sv``."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from tests.differential.driver import Var

ADMIN = "admin"


@dataclass(frozen=True)
class TopicId:
    """The id this broker gave topic ``name`` (learnt from Metadata or CreateTopics)."""

    name: str

    def resolve_on(self, side: Any) -> Any:
        import uuid

        return side.variables.get(f"topic_id:{side.resolve(self.name)}", uuid.UUID(int=0))


@dataclass(frozen=True)
class Subscription:
    """ConsumerProtocolSubscription v0 bytes naming these topics."""

    topics: tuple[str, ...]

    def resolve_on(self, side: Any) -> bytes:
        names = [side.resolve(name).encode() for name in self.topics]
        body = struct.pack(">hi", 0, len(names))
        for name in names:
            body += struct.pack(">h", len(name)) + name
        return body + struct.pack(">i", -1)


@dataclass(frozen=True)
class Assignment:
    """ConsumerProtocolAssignment v0 bytes: topic -> partitions."""

    partitions: tuple[tuple[str, tuple[int, ...]], ...]

    def resolve_on(self, side: Any) -> bytes:
        body = struct.pack(">hi", 0, len(self.partitions))
        for topic, numbers in self.partitions:
            name = side.resolve(topic).encode()
            body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(numbers))
            body += b"".join(struct.pack(">i", n) for n in numbers)
        return body + struct.pack(">i", -1)


def pid(client: str) -> Var:
    return Var(f"{client}.pid")


def epoch(client: str, offset: int = 0) -> Var:
    return Var(f"{client}.epoch", offset)


def member(client: str) -> Var:
    return Var(f"{client}.member")


def generation(client: str, offset: int = 0) -> Var:
    return Var(f"{client}.gen", offset)


def committed_topics(
    offsets: dict[str, list[tuple[int, int]]], metadata: str, **fields: Any
) -> list[dict[str, Any]]:
    """The topics of OffsetCommit and TxnOffsetCommit: each (partition, offset) with no
    leader epoch, this metadata and any other ``fields``."""
    return [
        {
            "name": t,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": o,
                    "committed_leader_epoch": -1,
                    "committed_metadata": metadata,
                    **fields,
                }
                for p, o in parts
            ],
        }
        for t, parts in offsets.items()
    ]
