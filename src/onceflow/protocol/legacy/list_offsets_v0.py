"""ListOffsets v0 (Kafka's ListOffsetsRequest.json before 4.0): a list of offsets per
partition. Burrow and other sarama-based tools still send it."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


class _ListOffsetsV0:
    """What kio's serializer reads from every entity class, the same for all of them here
    (kio's generated schemas spell it out in each class)."""

    __slots__ = ()
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)


class _RequestSchema(_ListOffsetsV0):
    __slots__ = ()
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader


class _ResponseSchema(_ListOffsetsV0):
    __slots__ = ()
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartition(_RequestSchema):
    __type__: ClassVar = EntityType.nested
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})
    max_num_offsets: i32 = field(metadata={"kafka_type": "int32"}, default=i32(1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopic(_RequestSchema):
    __type__: ClassVar = EntityType.nested
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequest(_RequestSchema):
    __type__: ClassVar = EntityType.request
    replica_id: BrokerId = field(metadata={"kafka_type": "int32"})
    topics: tuple[ListOffsetsTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponse(_ResponseSchema):
    __type__: ClassVar = EntityType.nested
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    old_style_offsets: tuple[i64, ...] = field(metadata={"kafka_type": "int64"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicResponse(_ResponseSchema):
    __type__: ClassVar = EntityType.nested
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartitionResponse, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponse(_ResponseSchema):
    __type__: ClassVar = EntityType.response
    topics: tuple[ListOffsetsTopicResponse, ...]
