"""Options and input columns of the ``onceflow-kafka`` sink (listed on
``KafkaSinkDataSource``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from onceflow.spark.common import kafka_client_config, lower_case_options, sink_id_of
from onceflow.spark.leader_change import DEFAULT_UNAVAILABLE_TIMEOUT_MS

# queryName: Spark passes writeStream.queryName(...) to the sink as an option.
_KNOWN = {
    "topic",
    "sinkid",
    "checkpointlocation",
    "path",
    "timeoutms",
    "unavailabletimeoutms",
    "queryname",
}
_REFUSED_KAFKA = {
    "transactional.id": "the sink derives it: onceflow-<sinkId>-<task partition>",
    "enable.idempotence": "transactions need the idempotent producer",
    "key.serializer": "cast the key column to string or binary",
    "value.serializer": "cast the value column to string or binary",
}


class KafkaSinkError(ValueError):
    """An option or input column of the Kafka sink is missing or wrong."""


@dataclass(frozen=True)
class KafkaSinkOptions:
    topic: str | None
    sink_id: str
    producer_config: dict[str, str]
    timeout_s: float
    # How long an output partition without a leader, the transaction coordinator or the
    # whole cluster is waited for before the task fails.
    unavailable_timeout_s: float = DEFAULT_UNAVAILABLE_TIMEOUT_MS / 1000


def parse_kafka_options(options: Mapping[str, Any], streaming: bool) -> KafkaSinkOptions:
    opts = lower_case_options(options)
    config = kafka_client_config(opts, _REFUSED_KAFKA, KafkaSinkError)
    for name in opts:
        if not name.startswith("kafka.") and name not in _KNOWN:
            raise KafkaSinkError(
                f"unknown option {name!r} for onceflow-kafka "
                "(known: kafka.*, topic, sinkId, checkpointLocation, timeoutMs, "
                "unavailableTimeoutMs)"
            )
    if not config.get("bootstrap.servers"):
        raise KafkaSinkError("onceflow-kafka needs the option 'kafka.bootstrap.servers'")
    sink_id = sink_id_of(
        opts,
        streaming,
        "onceflow-kafka needs the option 'sinkId' (stable name of this sink: its "
        "transactional ids and idempotency markers are derived from it)",
        KafkaSinkError,
    )
    timeout_ms = _milliseconds(opts, "timeoutMs", 60_000)
    unavailable_ms = _milliseconds(opts, "unavailableTimeoutMs", DEFAULT_UNAVAILABLE_TIMEOUT_MS)
    config.setdefault("partitioner", "murmur2_random")
    config.setdefault("linger.ms", "5")
    # A task's transaction must outlive an outage it rides through: librdkafka gives up on
    # a record after message.timeout.ms, which a transactional producer sets to this, and
    # the coordinator aborts the transaction after it. The task's own work gets timeoutMs.
    config.setdefault("transaction.timeout.ms", str(timeout_ms + unavailable_ms))
    # librdkafka waits reconnect.backoff.ms (100 ms) before its first connection to the
    # transaction coordinator; every task opens a new producer.
    config.setdefault("reconnect.backoff.ms", "10")
    return KafkaSinkOptions(
        opts.get("topic") or None, sink_id, config, timeout_ms / 1000, unavailable_ms / 1000
    )


def _milliseconds(opts: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(opts.get(name.lower(), str(default)))
    except ValueError:
        raise KafkaSinkError(f"{name} must be an integer (milliseconds)") from None
    if value <= 0:
        raise KafkaSinkError(f"{name} must be positive (milliseconds), got {value}")
    return value


def check_input_schema(schema: StructType, topic: str | None) -> None:
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KafkaSinkError("onceflow-kafka needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise KafkaSinkError(f"column {name!r} must be string or binary (cast it)")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise KafkaSinkError("column 'topic' must be a string")
    if "topic" not in fields and not topic:
        raise KafkaSinkError("give the option 'topic' or a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaSinkError("column 'partition' must be an int")
    if "headers" in fields and not isinstance(fields["headers"], ArrayType):
        raise KafkaSinkError("column 'headers' must be array<struct<key:string,value:binary>>")
