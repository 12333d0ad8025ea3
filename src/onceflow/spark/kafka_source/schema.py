"""The source's output schema: the same columns and types as Spark's Kafka connector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from onceflow.spark.kafka_source.options import OnceflowOptionError

if TYPE_CHECKING:
    import pyarrow as pa

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema; ``headers`` only with ``includeHeaders=true`` (as Spark)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects from ``read()`` (what ``to_arrow_schema`` derives)."""
    import pyarrow as pa  # here, not above: the driver's create_data_source has no use for it

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def check_schema(given: StructType, include_headers: bool) -> None:
    """Spark's Kafka source refuses user schemas; so do we, unless it is ours."""
    expected = spark_schema(include_headers)
    if given is not None and given != expected:
        raise OnceflowOptionError(
            "the onceflow source has a fixed schema and cannot be set with a custom one; "
            f"expected {expected.simpleString()}, got {given.simpleString()}"
        )
