"""Raw Kafka protocol helpers for tests: batches built with kio's record writers, and
Produce/Fetch/ListOffsets/CreateTopics/InitProducerId requests over one socket."""

from __future__ import annotations

import datetime
import io
import struct

import crc32c
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from onceflow.protocol.client import WireClient

CRC_START = 21  # the CRC-32C covers the batch from its attributes field to the end
TRANSACTIONAL = 0x10  # the batch attribute bit of a transactional batch


def record_batch(
    values: list[bytes],
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int | None = None,
    keys: list[bytes | None] | None = None,
    transactional: bool = False,
) -> bytes:
    """A v2 batch as a producer sends it (base offset 0), CRC-32C checked here too."""
    stamp = datetime.datetime.now(datetime.UTC)
    if timestamp_ms is not None:
        stamp = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    keys = keys or [None] * len(values)
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(TRANSACTIONAL if transactional else 0),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=TZAwareMicros.parse(stamp),
                offset=i64(index),
                key=key,
                value=value,
                headers=(),
            )
            for index, (key, value) in enumerate(zip(keys, values, strict=True))
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    data = buffer.getvalue()
    (crc,) = struct.unpack_from(">I", data, 17)
    assert crc == crc32c.crc32c(data[CRC_START:]), "kio wrote a batch with a wrong CRC"
    return data


def init_producer_id(client: WireClient) -> tuple[int, int]:
    response = client.request(
        InitProducerIdRequest,
        transactional_id=None,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
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


def fetch(client: WireClient, topic: str, partition: int, offset: int = 0, max_bytes=1 << 20):
    """(error code, high watermark, log start offset, raw records)."""
    response = client.request(
        FetchRequest,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=i32(1),
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=i32(partition),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(max_bytes),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    (answer,) = response.responses[0].partitions
    return int(answer.error_code), answer.high_watermark, answer.log_start_offset, answer.records


def decode(records: bytes | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set (CRC-checked by kio)."""
    out = []
    position = 0
    data = records or b""
    while position + 61 <= len(data):
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        if position + size > len(data):
            break  # a partial batch at the end of a size-limited fetch
        batch, _ = read_batch(data, position)
        out += [(record.offset, record.value) for record in batch.records]
        position += size
    return out


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


def metadata(client: WireClient, topics: list[str] | None, allow_auto_create: bool = False):
    return client.request(
        MetadataRequest,
        topics=None
        if topics is None
        else tuple(MetadataRequestTopic(topic_id=None, name=name) for name in topics),
        allow_auto_topic_creation=allow_auto_create,
        include_topic_authorized_operations=False,
    )
