"""Raw connections to the leader of each partition of a topic.

A Fetch must go to the partition's leader: on a cluster of several brokers any other one
answers NOT_LEADER_OR_FOLLOWER. Leaders come from Metadata and are looked up again when a
broker says it no longer leads (after a failover).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from onceflow.protocol.client import WireClient

# LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: the partition is moving; ask Metadata again.
LEADER_MOVED = frozenset({5, 6})


class NoLeader(RuntimeError):
    """A partition has no reachable leader within the time given."""


class PartitionLeaders:
    def __init__(self, conf: Mapping[str, Any], topic: str, timeout: float = 30.0) -> None:
        self.conf = dict(conf)
        self.topic = topic
        self.timeout = timeout
        self._leaders: dict[int, str] = {}
        self._clients: dict[str, WireClient] = {}

    def client(self, partition: int) -> WireClient:
        """An open connection to ``partition``'s leader."""
        from onceflow.admin.connect import wire_client
        from onceflow.admin.errors import Unreachable

        deadline = time.monotonic() + self.timeout
        while True:
            address = self._leaders.get(partition) or self._lookup(partition, deadline)
            if address in self._clients:
                return self._clients[address]
            try:
                client = self._clients[address] = wire_client(self.conf, address)
                return client
            except Unreachable as error:
                if time.monotonic() > deadline:
                    raise NoLeader(f"{self.topic}-{partition}: leader {address}: {error}") from None
                self.moved()
                time.sleep(0.2)

    def moved(self) -> None:
        """The leaders known are stale (a broker answered LEADER_MOVED)."""
        self._leaders.clear()
        self.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> PartitionLeaders:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lookup(self, partition: int, deadline: float) -> str:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        while True:
            try:
                metadata = AdminClient(self.conf).list_topics(self.topic, timeout=10)
            except KafkaException as error:
                raise NoLeader(f"{self.topic}: no metadata: {error}") from None
            described = metadata.topics.get(self.topic)
            if described is not None and described.error is None:
                self._leaders = {
                    p: f"{metadata.brokers[m.leader].host}:{metadata.brokers[m.leader].port}"
                    for p, m in described.partitions.items()
                    if m.leader in metadata.brokers
                }
            if partition in self._leaders:
                return self._leaders[partition]
            if time.monotonic() > deadline:
                raise NoLeader(f"{self.topic}-{partition} has no leader")
            time.sleep(0.2)
