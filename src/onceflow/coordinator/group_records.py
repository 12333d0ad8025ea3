"""Records of the ``__consumer_offsets`` topic, in Apache Kafka's own binary formats.

Keys start with an int16 version: 0 and 1 are offset commits (group, topic, partition),
2 is group metadata (group). Values also start with an int16 version. onceflow writes
OffsetCommitValue v3 and GroupMetadataValue v3 (the newest non-flexible versions), and
reads v0-v3 of both, so Kafka's ``kafka-console-consumer --formatter`` tools can read the
topic and vice versa. A record with a null value is a tombstone (offset or group deleted).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record this broker cannot parse."""


# -- primitive writers and a small reader -----------------------------------------------


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _I16.pack(len(encoded)) + encoded


def _nullable_string(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError("record is truncated")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def nullable_string(self) -> str | None:
        size = self.i16()
        return None if size < 0 else self._take(size).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        size = self.i32()
        return b"" if size < 0 else self._take(size)


# -- keys -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _string(group_id) + _string(topic) + _I32.pack(partition)


def group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _string(group_id)


def parse_key(data: bytes) -> OffsetKey | GroupKey:
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(reader.string())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


# -- offset values ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


def offset_value(value: OffsetValue) -> bytes:
    return (
        _I16.pack(OFFSET_VALUE_VERSION)
        + _I64.pack(value.offset)
        + _I32.pack(value.leader_epoch)
        + _string(value.metadata)
        + _I64.pack(value.commit_timestamp)
    )


def _value_reader(data: bytes, what: str) -> tuple[_Reader, int]:
    """A reader past the version of a value record, and that version (0 to 3 for both)."""
    reader = _Reader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown {what} value version {version}")
    return reader, version


def parse_offset_value(data: bytes) -> OffsetValue:
    reader, version = _value_reader(data, "offset commit")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    commit_timestamp = reader.i64()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp)


# -- group metadata values --------------------------------------------------------------


@dataclass(eq=False, slots=True)
class JoinedMember:
    """What a classic member gave of itself when it joined: kept by the group in memory
    (``group_metadata.Member``) and in its record (``MemberRecord``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int

    def joined(self) -> tuple:
        """These fields in order, to build the other kind of member from."""
        return tuple(getattr(self, f.name) for f in fields(JoinedMember))


@dataclass(slots=True)
class MemberRecord(JoinedMember):
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


def group_value(value: GroupValue) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation_id),
        _nullable_string(value.protocol_name),
        _nullable_string(value.leader_id),
        _I64.pack(value.state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _nullable_string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms),
            _I32.pack(member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


def parse_group_value(data: bytes) -> GroupValue:
    reader, version = _value_reader(data, "group metadata")
    protocol_type = reader.string()
    generation_id = reader.i32()
    protocol_name = reader.nullable_string()
    leader_id = reader.nullable_string()
    state_timestamp = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.i32()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return GroupValue(
        protocol_type, generation_id, protocol_name, leader_id, state_timestamp, members
    )


# -- the consumer protocol's subscription (for OffsetDelete and describe tools) -----------


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolSubscription (any version); None if it does not parse."""
    try:
        reader = _Reader(subscription)
        reader.i16()  # version; every version starts with the topic array
        count = reader.i32()
        if count < 0 or count > len(subscription):
            return None
        return {reader.string() for _ in range(count)}
    except (RecordFormatError, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """Partitions in a ConsumerProtocolAssignment; None if it does not parse."""
    if not assignment:
        return {}
    try:
        reader = _Reader(assignment)
        reader.i16()
        topics: dict[str, list[int]] = {}
        for _ in range(reader.i32()):
            topic = reader.string()
            count = reader.i32()
            if count < 0 or count > len(assignment):
                return None
            topics[topic] = [reader.i32() for _ in range(count)]
        return topics
    except (RecordFormatError, UnicodeDecodeError):
        return None
