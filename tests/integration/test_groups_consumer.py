"""A confluent-kafka consumer in a group on a real broker: subscribe, poll, commit
(sync, async, with metadata, auto-commit), committed() and position(), seek, pause and
resume."""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

from tests.integration.group_helpers import committed, consumer, drain, numbered, poll_records
from tests.kit.clients import create_topic, produce
from tests.kit.wait import wait_until

# -- confluent-kafka ------------------------------------------------------------------------


def test_subscribe_poll_commit_and_consumer_controls(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "controls", 2)
    produce(bootstrap, "controls", numbered(20), partitions=2)
    c = consumer(bootstrap, "controls-group")
    c.subscribe(["controls"])
    records = poll_records(c, 20)
    assert sorted((m.partition(), m.offset()) for m in records) == sorted(
        (p, o) for p in range(2) for o in range(10)
    )
    # commit sync (per message) and async (whole position), committed() and position()
    c.commit(message=records[0], asynchronous=False)
    assert committed(c, "controls", 2)[records[0].partition()] == records[0].offset() + 1
    c.commit(asynchronous=False)
    assert committed(c, "controls", 2) == [10, 10]
    positions = c.position([TopicPartition("controls", p) for p in range(2)])
    assert [tp.offset for tp in positions] == [10, 10]
    # seek back, to the beginning and to the end
    c.seek(TopicPartition("controls", 0, 3))
    assert [m.offset() for m in poll_records(c, 7)] == list(range(3, 10))
    c.seek(TopicPartition("controls", 1, OFFSET_BEGINNING))
    assert [m.offset() for m in poll_records(c, 10)] == list(range(10))
    c.seek(TopicPartition("controls", 1, OFFSET_END))
    # OFFSET_END is resolved by the fetcher a moment later: produce until partition 1
    # delivers; none of its ten old records may come back
    produced = 20
    seen: list[tuple[int, int]] = []

    def partition_1_delivers() -> bool:
        nonlocal produced
        produce(
            bootstrap, "controls", numbered(2, produced), partitions=2
        )  # one record per partition
        produced += 2
        seen.extend((m.partition(), m.offset()) for m in drain(c))
        return any(partition == 1 for partition, _ in seen)

    wait_until(partition_1_delivers, interval=0)
    end = produced // 2  # both partitions now end here
    assert min(offset for partition, offset in seen if partition == 1) >= 10
    assert sorted(offset for partition, offset in seen if partition == 0) == list(range(10, end))
    # pause and resume
    c.pause([TopicPartition("controls", 0)])
    produce(bootstrap, "controls", numbered(4, produced), partitions=2)
    assert {(m.partition(), m.offset()) for m in poll_records(c, 2)} == {(1, end), (1, end + 1)}
    assert c.poll(0.5) is None  # partition 0 stays paused
    c.resume([TopicPartition("controls", 0)])
    assert {(m.partition(), m.offset()) for m in poll_records(c, 2)} == {(0, end), (0, end + 1)}
    c.commit(asynchronous=False)
    assert committed(c, "controls", 2) == [end + 2, end + 2]
    c.close()


def test_commit_async_with_metadata_and_auto_commit(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "auto", 3)
    produce(bootstrap, "auto", numbered(30), partitions=3)
    reports = []
    c = consumer(
        bootstrap,
        "async-group",
        on_commit=lambda error, tps: reports.append(
            (error, [(t.partition, t.offset) for t in tps])
        ),
    )
    c.assign([TopicPartition("auto", p, 0) for p in range(3)])  # assign & poll
    poll_records(c, 30)
    c.commit(
        offsets=[TopicPartition("auto", 0, 5, "checkpoint-a"), TopicPartition("auto", 2, 10)],
        asynchronous=True,
    )
    wait_until(lambda: c.poll(0.1) is None and reports)
    assert reports == [(None, [(0, 5), (2, 10)])]
    tps = c.committed([TopicPartition("auto", p) for p in range(3)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in tps] == [
        (5, "checkpoint-a"),
        (-1001, None),
        (10, None),
    ]
    c.close()

    auto = consumer(
        bootstrap, "auto-group", **{"enable.auto.commit": True, "auto.commit.interval.ms": 100}
    )
    auto.subscribe(["auto"])
    poll_records(auto, 30)
    wait_until(lambda: auto.poll(0.1) is None and committed(auto, "auto", 3) == [10, 10, 10])
    auto.close()
