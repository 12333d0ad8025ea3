"""Raw Kafka protocol requests for tests over ``WireClient`` (one socket): Produce, Fetch,
ListOffsets, CreateTopics, InitProducerId, Metadata; ``encode`` and ``framed`` for the
bytes of a request sent without a client. Batches: ``tests.kit.batches``."""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from typing import Any

from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v13 import request as fetch_v13
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i8, i16, i32, i64

from onceflow.protocol.client import WireClient
from tests.kit.batches import decode


def encode(request: Any, correlation_id: int, client_id: str = "test") -> bytes:
    """A request as it follows the size on the wire: its header (v2 for a flexible
    version, v1 otherwise), then its body."""
    cls = type(request)
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=i16(cls.__api_key__),
        request_api_version=i16(cls.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, request)
    return buffer.getvalue()


def framed(payload: bytes) -> bytes:
    """``payload`` after its 4-byte size: a frame as a client sends it."""
    return struct.pack(">i", len(payload)) + payload


def request_producer_id(client: WireClient, transactional_id: str | None = None) -> Any:
    """The InitProducerId response for a new producer: idempotent, or the transactional
    producer of ``transactional_id`` (transaction timeout 60 s)."""
    return client.request(
        InitProducerIdRequest,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )


def init_producer_id(client: WireClient, transactional_id: str | None = None) -> tuple[int, int]:
    """(producer id, epoch) of ``request_producer_id``, which must succeed."""
    response = request_producer_id(client, transactional_id)
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def produce(
    client: WireClient, topic: str, partition: int, records: bytes | None, acks: int = -1
) -> tuple[int, int]:
    """(error code, base offset) of one partition's produce."""
    response = client.request(
        ProduceRequest,
        transactional_id=None,
        acks=i16(acks),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=i32(partition), records=records),),
            ),
        ),
    )
    (topic_response,) = response.responses
    (answer,) = topic_response.partition_responses
    return int(answer.error_code), answer.base_offset


def list_offset(client: WireClient, topic: str, partition: int, timestamp: int = -1):
    """(error code, offset, timestamp) for one partition; -1 latest, -2 earliest."""
    response = client.request(
        ListOffsetsRequest,
        replica_id=i32(-1),
        isolation_level=i8(0),
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=(
                    ListOffsetsPartition(partition_index=i32(partition), timestamp=i64(timestamp)),
                ),
            ),
        ),
    )
    (answer,) = response.topics[0].partitions
    return int(answer.error_code), answer.offset, answer.timestamp


def fetch_topic(
    client: WireClient,
    topic: str | uuid.UUID,
    partition: int = 0,
    offset: int = 0,
    max_bytes: int = 1 << 20,
) -> Any:
    """The answer about ``topic`` to a Fetch of one partition: by name (Fetch v12) or, for
    a topic id, by id (v13)."""
    if isinstance(topic, uuid.UUID):
        kind, named = fetch_v13, {"topic_id": topic}
    else:
        kind, named = fetch_v12, {"topic": topic}
    wanted = kind.FetchPartition(
        partition=i32(partition), fetch_offset=i64(offset), partition_max_bytes=i32(max_bytes)
    )
    response = client.request(
        kind.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=i32(1),
        topics=(kind.FetchTopic(**named, partitions=(wanted,)),),
        forgotten_topics_data=(),
    )
    (answer,) = response.responses
    return answer


def fetch(
    client: WireClient, topic: str | uuid.UUID, partition: int, offset: int = 0, max_bytes=1 << 20
):
    """(error code, high watermark, log start offset, raw records); ``topic`` a name or id."""
    (answer,) = fetch_topic(client, topic, partition, offset, max_bytes).partitions
    return int(answer.error_code), answer.high_watermark, answer.log_start_offset, answer.records


def fetch_values(client: WireClient, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    """Every record of a partition from its log start, read in as many fetches as needed."""
    code, offset, _ = list_offset(client, topic, partition, -2)
    assert code == 0, code
    values: list[tuple[int, bytes]] = []
    while True:
        code, _, _, records = fetch(client, topic, partition, offset)
        assert code == 0, code
        batch = [(o, v) for o, v in decode(records) if o >= offset]
        if not batch:
            return values
        values += batch
        offset = batch[-1][0] + 1


def create_topic(
    client: WireClient,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: dict[str, str | None] | None = None,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    response = client.request(
        CreateTopicsRequest,
        topics=(
            CreatableTopic(
                name=name,
                num_partitions=i32(partitions),
                replication_factor=i16(replication_factor),
                assignments=(),
                configs=tuple(
                    CreatableTopicConfig(name=key, value=value)
                    for key, value in (configs or {}).items()
                ),
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=validate_only,
    )
    (result,) = response.topics
    return int(result.error_code), result.error_message


def metadata(client: WireClient, topics: list[str] | None = None, allow_auto_create: bool = False):
    """Metadata of ``topics``, or of every topic."""
    return client.request(
        MetadataRequest,
        topics=None
        if topics is None
        else tuple(MetadataRequestTopic(topic_id=None, name=name) for name in topics),
        allow_auto_topic_creation=allow_auto_create,
        include_topic_authorized_operations=False,
    )
