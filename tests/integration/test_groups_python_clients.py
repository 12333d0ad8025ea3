"""kafka-python and aiokafka consumer groups on a real broker: join, consume, commit and
rebalance when a second member joins."""

from __future__ import annotations

import asyncio
import time

from tests.integration.group_helpers import FAST_GROUPS, numbered
from tests.kit.clients import create_topic, produce
from tests.kit.wait import wait_until

# -- other clients --------------------------------------------------------------------------


def test_kafka_python_group_join_consume_commit_rebalance(kafka_broker_factory) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    broker = kafka_broker_factory(config=FAST_GROUPS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "kp", 4)
    produce(bootstrap, "kp", numbered(40), partitions=4)

    def make() -> KafkaConsumer:
        return KafkaConsumer(
            "kp",
            bootstrap_servers=bootstrap,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=3000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )

    # kafka-python 3.0.12 drops the result of a JoinGroup/SyncGroup that completes after the
    # poll() that sent it timed out (the next poll sends a fresh JoinGroup, heartbeats stay
    # off); with short polls on a loaded machine it can stay out of its group for good. Poll
    # long enough that a join completes inside one poll.
    def drain(consumers, count: int) -> list:
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            for c in consumers:
                for records in c.poll(timeout_ms=1000).values():
                    seen += [(r.partition, r.offset) for r in records]
        return seen

    first = make()
    assert sorted(drain([first], 40)) == sorted((p, o) for p in range(4) for o in range(10))
    first.commit()
    second = make()

    def split() -> bool:
        for c in (first, second):  # nothing to read yet: these polls only drive the join
            c.poll(timeout_ms=1000)
        a, b = first.assignment(), second.assignment()
        return bool(a) and bool(b) and not (a & b) and len(a | b) == 4

    wait_until(split, timeout=60, interval=0)
    produce(bootstrap, "kp", numbered(40, 40), partitions=4)
    seen = drain([first, second], 40)
    assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(10, 20))
    first.commit()
    second.commit()
    offsets = [first.committed(KafkaPythonPartition("kp", p)) for p in range(4)]
    assert offsets == [20, 20, 20, 20]
    first.close()
    second.close()


def test_aiokafka_group_join_consume_commit_rebalance(kafka_broker_factory) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioPartition

    broker = kafka_broker_factory(config=FAST_GROUPS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "ak", 4)
    produce(bootstrap, "ak", numbered(40), partitions=4)

    async def scenario() -> None:
        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                "ak",
                bootstrap_servers=bootstrap,
                group_id="ak-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=3000,
                heartbeat_interval_ms=300,
                fetch_max_wait_ms=100,
            )

        async def drain(consumers, count: int) -> list:
            seen = []
            deadline = time.monotonic() + 30
            while len(seen) < count and time.monotonic() < deadline:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=100)
                    for records in batches.values():
                        seen += [(r.partition, r.offset) for r in records]
            return seen

        first = make()
        await first.start()
        second = make()
        try:
            assert sorted(await drain([first], 40)) == sorted(
                (p, o) for p in range(4) for o in range(10)
            )
            await first.commit()
            await second.start()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await drain([first, second], 0)
                await asyncio.gather(first.getmany(timeout_ms=100), second.getmany(timeout_ms=100))
                a, b = first.assignment(), second.assignment()
                if a and b and not (a & b) and len(a | b) == 4:
                    break
            else:
                raise AssertionError("aiokafka members never split the partitions")
            produce(bootstrap, "ak", numbered(40, 40), partitions=4)
            seen = await drain([first, second], 40)
            assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(10, 20))
            await first.commit()
            await second.commit()
            offsets = [await first.committed(AioPartition("ak", p)) for p in range(4)]
            assert offsets == [20, 20, 20, 20]
        finally:
            await first.stop()
            await second.stop()

    asyncio.run(scenario())
