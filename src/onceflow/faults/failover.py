"""Broker failover on an Apache Kafka cluster: which node to kill, and keeping a worker going.

Shared by the chaos matrix's failover cells (chaos/failover_cells.py), onceflow prove's
node faults and the failover tests (tests/apache_kafka/test_transactional_failover.py):

* ``node_victims`` — the node leading a partition, or coordinating a transactional id or
  a consumer group (``FaultActions.victim``);
* ``committed_count`` — a group's committed offsets, the progress a supervised run watches
  (``FaultRun(supervised=True)`` restarts a worker whose offsets stop moving: librdkafka
  can wedge once a coordinator's node died);
* ``healthy`` — every node up and every replica in sync before the next run;
* ``probe_acks`` — produce with ``acks=all`` and report what was acknowledged, to show that
  nothing is while too few replicas are alive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from onceflow.faults.actions import Victim
from onceflow.faults.schedule import GROUP_COORDINATOR, LEADER, TXN_COORDINATOR

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# librdkafka's send_offsets_to_transaction can block past its timeout once the group
# coordinator's node died (librdkafka issues 5456, 5511): the worker is then wedged, and a
# supervised run restarts it after this long without progress.
STALL_SECONDS = 45.0
# What a producer may get while too few replicas are alive; never an acknowledgement.
REFUSALS = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


def node_victims(
    cluster: KafkaCluster, *, topic: str, group: str = "", transactional_id: str = "",
    partition: int = 0,
) -> Callable[[str], Victim]:  # fmt: skip
    """``FaultActions.victim`` for a run whose names are known: the node leading
    ``topic``'s ``partition`` (with its followers), or coordinating ``transactional_id`` or
    ``group``."""

    def victim(action: str) -> Victim:
        if action == LEADER:
            return leader_victim(cluster, topic, partition)
        if action == TXN_COORDINATOR:
            node = cluster.coordinator_of(transactional_id=transactional_id)
            return Victim(node, f"transactional id {transactional_id}")
        if action == GROUP_COORDINATOR:
            return Victim(cluster.coordinator_of(group=group), f"group {group}")
        raise ValueError(f"no victim for {action!r}")

    return victim


def leader_victim(cluster: KafkaCluster, topic: str, partition: int = 0) -> Victim:
    metadata = cluster.partition(topic, partition)
    followers = tuple(int(n) for n in metadata.replicas if n != metadata.leader)
    return Victim(int(metadata.leader), f"{topic} partition {partition}", followers,
                  (topic, partition))  # fmt: skip


def committed_count(bootstrap: str, group: str, topic: str, partitions: int) -> int | None:
    """How many of ``topic``'s records ``group`` has committed (transactions included);
    None while the group coordinator cannot say (it is moving)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
    except KafkaException:
        return None
    finally:
        consumer.close()
    return sum(max(o.offset, 0) for o in offsets)


@dataclass
class ProbeResult:
    acked: int = 0
    errors: list[KafkaError] = field(default_factory=list)

    @property
    def refused_only(self) -> bool:
        """Nothing acknowledged, and every failure one of Kafka's refusals (REFUSALS)."""
        return self.acked == 0 and all(e.code() in REFUSALS for e in self.errors)

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for error in self.errors:
            kinds[error.name()] = kinds.get(error.name(), 0) + 1
        refused = ", ".join(f"{count} {name}" for name, count in sorted(kinds.items()))
        return f"{self.acked} acknowledged, {len(self.errors)} refused ({refused or '-'})"


def probe_acks(
    bootstrap: str, topic: str, values: Sequence[bytes], timeout_ms: int = 8000
) -> ProbeResult:
    """Produce ``values`` with an idempotent ``acks=all`` producer that gives up after
    ``timeout_ms``; what came back."""
    result = ProbeResult()

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is None:
            result.acked += 1
        else:
            result.errors.append(error)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": timeout_ms,
            "request.timeout.ms": min(5000, timeout_ms),
            "log_level": 3,
        }
    )
    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    producer.flush(timeout_ms / 1000 + 20)
    return result


def healthy(cluster: KafkaCluster, *topics: str) -> None:
    """Every node up and every replica of ``topics`` (and of the internal topics that
    exist) in sync: a cell must not start on what the previous one left behind."""
    cluster.heal()
    existing = cluster.metadata().topics
    for topic in (*INTERNAL_TOPICS, *topics):
        if topic in existing:
            cluster.wait_in_sync(topic, timeout=90)
