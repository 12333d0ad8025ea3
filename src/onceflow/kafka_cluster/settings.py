"""The broker settings every node of a ``KafkaCluster`` gets, unless ``config=`` overrides
them: replication factor 3 and ``min.insync.replicas=2`` (1 and 1 for a single node),
small internal topics, fast failure detection."""

from __future__ import annotations

INTERNAL_TOPIC_PARTITIONS = 5  # __consumer_offsets, __transaction_state (Kafka: 50)


def default_properties(nodes: int) -> dict[str, str]:
    """The broker settings every node gets (``config=`` overrides any of them)."""
    replication = str(min(3, nodes))
    min_isr = "2" if nodes >= 3 else "1"
    return {
        "default.replication.factor": replication,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "unclean.leader.election.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        # A killed node is fenced (its partitions get new leaders) after 6 s, not 9 s. A
        # single node has no other broker to move its partitions to: its own controller
        # fencing it after a few seconds of CPU starvation only left every partition
        # without a leader (and bumped the coordinators' epochs), so it gets a minute.
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "6000" if nodes > 1 else "60000",
        # The controller quorum rides out seconds of CPU or disk starvation (a shared
        # 2-core machine): with Kafka's 2 s fetch and 1 s election timeouts the active
        # controller resigned when a voter did not fetch for 3 s, its fencing of a killed
        # node was lost, and elections kept timing out for over a minute.
        "controller.quorum.fetch.timeout.ms": "6000",
        "controller.quorum.election.timeout.ms": "2000",
    }
