"""The one normalisation applied to both brokers' responses before they are compared.

A response becomes plain data (dicts, lists, ints, strings, bytes; record sets decoded
into batches, ``tests.kit.batches.decode_batches``); then, and only then:

1. throttle times and every error message (``error_message``,
   ``batch_index_error_message``) are dropped: texts are not protocol;
2. hosts, ports, cluster ids, client hosts, log directories and disk sizes become
   ``<host>``, ``<port>``, ``<cluster>``, ``<client-host>``, ``<log-dir>``, ``<disk-bytes>``;
   node ids >= 0 become ``<node>`` (one node on each side);
3. a topic id becomes ``<id of ~t>`` (the topic this broker gave it to); other topic ids,
   producer ids, member ids and fetch session ids are replaced by their order of first
   appearance on that side (``<topic-id#0>``, ``<pid#1>``, ``<member#0>``...);
   a producer epoch by its order of appearance for its producer id (``<epoch#0>``...);
4. times the broker assigns (log append time, transaction start time, the timestamps of
   control batches and of LogAppendTime batches, a ListOffsets timestamp later than 2025,
   which no scenario's record carries: a marker's) become ``<time>``;
5. the unique per-scenario prefix of topic, group and transactional-id names becomes ``~``;
6. the partitions of a transaction (DescribeTransactions) are sorted: a set to both;
7. listings of everything a broker holds (ListGroups, ListTransactions, Metadata for all
   topics) keep only the scenario's own entries: the scenarios share the two brokers;
8. ApiVersions keeps its error code only: the version ranges are the releases' own (onceflow
   serves Kafka 3.9's, tests/integration/test_compatibility_doc.py checks them).

Error codes, offsets, watermarks, log start offsets, record contents, sequence numbers,
and which topics, partitions, members or configs are present are never touched.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from tests.kit.batches import decode_batches

DROPPED = {"throttle_time_ms", "throttle_time", "error_message", "batch_index_error_message"}
HOSTS = {
    "host": "<host>",
    "port": "<port>",
    "cluster_id": "<cluster>",
    "client_host": "<client-host>",
    "log_dir": "<log-dir>",
    "total_bytes": "<disk-bytes>",
    "usable_bytes": "<disk-bytes>",
}
NODE_FIELDS = {
    "node_id",
    "leader_id",
    "controller_id",
    "broker_id",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
    "preferred_read_replica",
    "replicas",
    "coordinator_id",
}
BROKER_TIMES = {
    "log_append_time",
    "transaction_start_time",
    "log_append_time_ms",
    "transaction_start_time_ms",
    "last_timestamp",
}
MEMBER_FIELDS = {"member_id", "leader"}
ZERO_UUID = uuid.UUID(int=0)
# Scenarios stamp records around records.BASE_TIME_MS (November 2023): a time after this
# one (2025) is a broker's clock, e.g. a transaction marker's.
WALL_CLOCK_FLOOR_MS = 1_735_689_600_000
# Listings of the whole broker, which other scenarios share: (list field, name field).
LISTINGS = {
    3: ("topics", "name"),
    16: ("groups", "group_id"),
    66: ("transaction_states", "transactional_id"),
}


class Normaliser:
    """One per broker and scenario: the order-of-appearance maps live here."""

    def __init__(self, prefix: str, variables: dict[str, Any] | None = None) -> None:
        self.prefix = prefix
        self.variables = variables if variables is not None else {}
        self.maps: dict[str, dict[Any, str]] = {}
        self.epochs: dict[Any, dict[int, str]] = {}

    def response(self, api_key: int, response: Any, whole_broker: bool = False) -> Any:
        if isinstance(response, dict):  # undecodable: compared as it is
            return response
        data = plain(response)
        if api_key == 18:
            return {"error_code": data.get("error_code")}
        if api_key in LISTINGS and (whole_broker or api_key != 3):
            field, name = LISTINGS[api_key]
            data[field] = [
                item
                for item in data.get(field) or ()
                if str(item.get(name)).startswith(self.prefix)
            ]
        if api_key == 65:  # DescribeTransactions: a transaction's partitions are a set
            for state in data.get("transaction_states") or ():
                for topic in state.get("topics") or ():
                    topic["partitions"] = sorted(topic.get("partitions") or ())
        if api_key == 2:  # ListOffsets: the time of a control batch is the broker's
            for topic in data.get("topics") or ():
                for partition in topic.get("partitions") or ():
                    if partition.get("timestamp", -1) > WALL_CLOCK_FLOOR_MS:
                        partition["timestamp"] = "<time>"
        return self._walk(data)

    def _token(self, kind: str, value: Any) -> str:
        seen = self.maps.setdefault(kind, {})
        if value not in seen:
            seen[value] = f"<{kind}#{len(seen)}>"
        return seen[value]

    def _topic_id(self, value: str) -> str:
        """``<id of ~t>`` for the id of a topic this side named before, else by order."""
        for key, known in self.variables.items():
            if key.startswith("topic_id:") and str(known) == value:
                return f"<id of {key[len('topic_id:') :].replace(self.prefix, '~')}>"
        return self._token("topic-id", value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if isinstance(value, str):
            return value.replace(self.prefix, "~") if self.prefix else value
        return value

    def _dict(self, data: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        pid = data.get("producer_id")
        for key, value in data.items():
            if key in DROPPED:
                continue
            if key in HOSTS and value not in (None, "", -1):
                out[key] = HOSTS[key]
            elif key in NODE_FIELDS:
                out[key] = _nodes(value)
            elif key in BROKER_TIMES and isinstance(value, int) and value >= 0:
                out[key] = "<time>"
            elif key == "topic_id" and isinstance(value, str) and value != str(ZERO_UUID):
                out[key] = self._topic_id(value)
            elif key == "producer_id" and isinstance(value, int) and value >= 0:
                out[key] = self._token("pid", value)
            elif key == "producer_epoch" and isinstance(value, int) and value >= 0:
                epochs = self.epochs.setdefault(pid, {})
                if value not in epochs:
                    epochs[value] = f"<epoch#{len(epochs)}>"
                out[key] = epochs[value]
            elif key in MEMBER_FIELDS and isinstance(value, str) and value:
                out[key] = self._token("member", value)
            elif key == "session_id" and isinstance(value, int) and value != 0:
                out[key] = self._token("session", value)
            else:
                out[key] = self._walk(value)
        return out


def _nodes(value: Any) -> Any:
    if isinstance(value, list):
        return [_nodes(item) for item in value]
    if isinstance(value, int) and value >= 0:
        return "<node>"
    return value


def plain(value: Any, kafka_type: str | None = None) -> Any:
    """A kio entity as dicts, lists and scalars; record sets decoded."""
    if kafka_type == "records":
        return decode_batches(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name), f.metadata.get("kafka_type"))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, tuple | list):
        return [plain(item, kafka_type) for item in value]
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "value") and hasattr(value, "name"):  # enums (ErrorCode)
        return int(value.value)
    return value
