"""A real Apache Kafka KRaft cluster (3 combined nodes, from Maven's jars) and its faults.

Every test here shares the session's ``apache_kafka_cluster`` (one xdist worker, see
onceflow.testing) and brings back any node it kills before it ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from onceflow.kafka_cluster import KAFKA_VERSION, KafkaCluster
from onceflow.kafka_cluster.probe import node_metadata, quorum
from tests.kit.wait import wait_until


class Acks:
    """Delivery reports of one producer: acknowledged values (in order) and errors."""

    def __init__(self) -> None:
        self.acked: list[int] = []
        self.errors: list[KafkaError] = []

    def __call__(self, error, message) -> None:
        if error is None:
            self.acked.append(int(message.value()))
        else:
            self.errors.append(error)


def consume_values(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[int]:
    """Every value in ``topic`` (one partition) from the start, once ``expected`` arrived
    and a further poll brought nothing new."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                if len(values) >= expected:
                    break
                continue
            assert message.error() is None, message.error()
            values.append(int(message.value()))
    finally:
        consumer.close()
    return values


def idempotent_producer(bootstrap: str, **extra) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **extra,
        }
    )


def test_every_node_serves_metadata_listing_all_three_brokers(
    apache_kafka_cluster: KafkaCluster,
):
    cluster = apache_kafka_cluster
    assert len(cluster.bootstrap.split(",")) == 3
    for node in cluster.nodes.values():
        assert node_metadata(node.bootstrap).brokers == {1, 2, 3}
    assert all(rss and rss < 600 * 2**20 for rss in cluster.rss_bytes().values())


def test_acks_all_idempotent_records_are_consumed_exactly_once(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    topic = apache_kafka_topic_factory(config={"min.insync.replicas": "2"})
    assert apache_kafka_cluster.isr_of(topic) == [1, 2, 3]
    acks = Acks()
    producer = idempotent_producer(apache_kafka_cluster.bootstrap)
    for value in range(1000):
        producer.produce(topic, str(value).encode(), on_delivery=acks)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert acks.errors == [] and acks.acked == list(range(1000))
    assert consume_values(apache_kafka_cluster.bootstrap, topic, 1000) == list(range(1000))


def test_sigkill_of_the_partition_leader_loses_no_acknowledged_record(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    """Producing goes on through the leader election; the killed node comes back and
    catches up (ISR 3 again); every acknowledged record is there exactly once, in order."""
    cluster = apache_kafka_cluster
    topic = apache_kafka_topic_factory(config={"min.insync.replicas": "2"})
    acks = Acks()
    producer = idempotent_producer(cluster.bootstrap, **{"message.timeout.ms": 60000})
    old_leader = cluster.leader_of(topic)
    try:
        for value in range(3000):
            producer.produce(topic, str(value).encode(), on_delivery=acks)
            producer.poll(0)
            if value == 1000:
                producer.flush(30)
                cluster.kill(old_leader)
            elif value > 1000 and value % 100 == 0:
                time.sleep(0.05)  # keep producing across the election, not all at once
        assert producer.flush(60) == 0
        new_leader = cluster.leader_of(topic)
        assert new_leader not in (old_leader, -1)
        assert acks.errors == []
        assert acks.acked == list(range(3000))

        cluster.start_node(old_leader)
        cluster.wait_in_sync(topic, timeout=60)
        assert cluster.isr_of(topic) == [1, 2, 3]
        assert consume_values(cluster.bootstrap, topic, 3000) == list(range(3000))
    finally:
        cluster.heal()


def test_with_two_nodes_down_acks_all_is_never_acknowledged_until_one_returns(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    """Two of three combined nodes down also loses the controller quorum: the ISR cannot
    shrink below the last dead follower, so the leader waits for it and the producer
    times out (or gets NOT_ENOUGH_REPLICAS); it acknowledges nothing. A record that timed
    out may still be committed later (Kafka's at-least-once edge): only acks count."""
    cluster = apache_kafka_cluster
    topic = apache_kafka_topic_factory(config={"min.insync.replicas": "2"})
    leader = cluster.leader_of(topic)
    first, second = [n for n in (1, 2, 3) if n != leader]
    try:
        cluster.kill(first)
        wait_until(lambda: cluster.isr_of(topic) == sorted([leader, second]), 30, 0.2, what="ISR 2")
        cluster.kill(second)

        stuck = Acks()
        producer = idempotent_producer(
            cluster.bootstrap, **{"message.timeout.ms": 8000, "request.timeout.ms": 5000}
        )
        for value in range(5):
            producer.produce(topic, str(value).encode(), on_delivery=stuck)
        producer.flush(30)
        assert stuck.acked == []
        assert len(stuck.errors) == 5
        assert {e.code() for e in stuck.errors} <= {
            KafkaError._MSG_TIMED_OUT,
            KafkaError.NOT_ENOUGH_REPLICAS,
            KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            KafkaError.REQUEST_TIMED_OUT,
        }, stuck.errors

        cluster.start_node(second)
        acks = Acks()
        producer = idempotent_producer(cluster.bootstrap, **{"message.timeout.ms": 60000})
        for value in range(100, 110):
            producer.produce(topic, str(value).encode(), on_delivery=acks)
        assert producer.flush(60) == 0
        assert acks.errors == [] and acks.acked == list(range(100, 110))

        cluster.start_node(first)
        cluster.wait_in_sync(topic, timeout=60)
        values = consume_values(cluster.bootstrap, topic, 10)
        assert [v for v in values if v >= 100] == list(range(100, 110))
        assert len(values) == len(set(values))
    finally:
        cluster.heal()


def test_a_restarted_active_controller_catches_up_as_a_voter(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    """The active controller killed, metadata changed without it (a new topic), the node
    restarted: ``wait_quorum_caught_up`` returns once DescribeQuorum shows a leader and
    every voter's log at least at the high watermark of the change."""
    cluster = apache_kafka_cluster
    first = quorum(cluster.node(1).bootstrap)
    assert first.leader in (1, 2, 3) and sorted(first.voters) == [1, 2, 3], first
    others = [n for n in (1, 2, 3) if n != first.leader]
    try:
        cluster.kill(first.leader)
        apache_kafka_topic_factory()

        def new_leader():
            view = quorum(cluster.node(others[0]).bootstrap)
            return view if view.leader in others else None

        changed = wait_until(new_leader, 30, 0.2, what="a new active controller")
        cluster.start_node(first.leader)
        cluster.wait_quorum_caught_up(timeout=60)
        view = quorum(cluster.node(first.leader).bootstrap)
        assert view.leader in (1, 2, 3)
        assert all(view.voters[n] >= changed.high_watermark for n in (1, 2, 3)), view
    finally:
        cluster.heal()


def test_below_min_insync_replicas_the_producer_gets_not_enough_replicas(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    """Kafka's own error, without retries hiding it: min.insync.replicas=3, one node down."""
    cluster = apache_kafka_cluster
    topic = apache_kafka_topic_factory(config={"min.insync.replicas": "3"})
    leader = cluster.leader_of(topic)
    follower = next(n for n in (1, 2, 3) if n != leader)
    try:
        cluster.kill(follower)
        wait_until(
            lambda: len(cluster.isr_of(topic, seen_by=leader)) == 2,
            30,
            0.2,
            what="the ISR to shrink",
        )
        # The leader's metadata cache shows the shrink just before its partition applies
        # it; a batch appended in between waits for a high watermark that Kafka 4 does not
        # move below min.insync.replicas, and times out (REQUEST_TIMED_OUT).
        cluster.wait_metadata_applied(leader)
        refused = Acks()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0})
        producer.produce(topic, b"1", on_delivery=refused)
        producer.flush(30)
        assert refused.acked == []
        assert [error.code() for error in refused.errors] == [KafkaError.NOT_ENOUGH_REPLICAS], (
            refused.errors
        )

        cluster.start_node(follower)
        wait_until(lambda: len(cluster.isr_of(topic, seen_by=leader)) == 3, 60, 0.2, what="ISR 3")
        accepted = Acks()
        producer = idempotent_producer(cluster.bootstrap, **{"message.timeout.ms": 30000})
        producer.produce(topic, b"2", on_delivery=accepted)
        producer.flush(30)
        assert accepted.errors == [], accepted.errors
        assert accepted.acked == [2]
    finally:
        cluster.heal()


def test_coordinator_of_names_the_node_kafka_answers(
    apache_kafka_cluster, apache_kafka_topic_factory
):
    cluster = apache_kafka_cluster
    topic = apache_kafka_topic_factory()
    group = f"group-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    consumer.poll(5)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert cluster.coordinator_of(group=group) == described.coordinator.id
    finally:
        consumer.close()

    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(30)
    listed = subprocess.run(
        [sys.executable, "-m", "onceflow", "transactions", "list", "--json",
         "--bootstrap", cluster.bootstrap],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    coordinators = {t["transactional_id"]: t["coordinator"] for t in json.loads(listed.stdout)}
    assert (
        cluster.coordinator_of(transactional_id=transactional_id) == coordinators[transactional_id]
    )


def test_the_pinned_release_is_the_one_running(apache_kafka_cluster):
    log = apache_kafka_cluster.nodes[1].log_path.read_text()
    assert f"Kafka version: {KAFKA_VERSION}" in log


def test_single_node_mode_uses_replication_factor_one(tmp_path):
    with KafkaCluster(1, directory=tmp_path / "single") as cluster:
        assert cluster.bootstrap.count(",") == 0
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = f"single-{uuid.uuid4().hex[:8]}"
        producer = idempotent_producer(cluster.bootstrap)
        producer.produce(topic, b"7")  # auto-created, replication factor 1
        assert producer.flush(30) == 0
        described = admin.list_topics(topic, timeout=10).topics[topic]
        assert [p.replicas for p in described.partitions.values()] == [[1]]
