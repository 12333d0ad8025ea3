"""Consumer groups across a broker SIGKILL: committed offsets survive it, and the
members of a group carry on once the broker is back."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from tests.integration.group_helpers import FAST_GROUPS, committed, consumer, numbered, poll_records
from tests.kit.clients import create_topic, produce


def test_committed_offsets_survive_broker_sigkill(kafka_broker_process) -> None:
    bootstrap = kafka_broker_process.bootstrap
    create_topic(bootstrap, "durable", 3)
    produce(bootstrap, "durable", numbered(30), partitions=3)
    c = consumer(bootstrap, "durable-group")
    c.subscribe(["durable"])
    poll_records(c, 30)
    c.commit(
        offsets=[
            TopicPartition("durable", 0, 4, "four"),
            TopicPartition("durable", 1, 7),
            TopicPartition("durable", 2, 10),
        ],
        asynchronous=False,
    )
    c.close()
    kafka_broker_process.restart()  # SIGKILL: no clean shutdown
    resumed = consumer(bootstrap, "durable-group")
    tps = resumed.committed([TopicPartition("durable", p) for p in range(3)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in tps] == [(4, "four"), (7, None), (10, None)]
    resumed.subscribe(["durable"])
    records = poll_records(resumed, 9)  # 6 from partition 0, 3 from partition 1
    first = {}
    for message in records:
        first.setdefault(message.partition(), message.offset())
    assert first == {0: 4, 1: 7}
    assert resumed.poll(0.5) is None
    resumed.close()


def test_group_members_carry_on_across_a_broker_sigkill(kafka_broker_factory) -> None:
    broker = kafka_broker_factory(config=FAST_GROUPS, process=True)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "carry", 2)
    produce(bootstrap, "carry", numbered(10), partitions=2)
    c = consumer(bootstrap, "carry-group", **{"session.timeout.ms": 6000})
    c.subscribe(["carry"])
    poll_records(c, 10)
    c.commit(asynchronous=False)
    broker.restart()
    produce(bootstrap, "carry", numbered(10, 10), partitions=2)
    records = poll_records(c, 10, timeout=60)
    assert sorted((m.partition(), m.offset()) for m in records) == sorted(
        (p, o) for p in range(2) for o in range(5, 10)
    )
    c.commit(asynchronous=False)
    assert committed(c, "carry", 2) == [10, 10]
    c.close()
