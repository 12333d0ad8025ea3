"""``onceflow demo``: the embedded broker with a real client, end to end, in seconds.

Starts an ``onceflow broker`` subprocess on a free port (data in ``.demo/broker``, kept
between runs), creates a topic, produces keyed records with an idempotent acks=all
producer, consumes them back in assign mode and checks what a user relies on: every
acknowledged record is stored at its acknowledged offset, each key stays on one
partition, and records of a key come back in the order they were sent.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from onceflow.broker.process import BrokerProcess
from onceflow.producing import produce_waiting

TIMEOUT = 30.0


@dataclass
class DemoResult:
    produced: int = 0
    consumed: int = 0
    missing: int = 0
    out_of_order: int = 0
    keys_on_two_partitions: int = 0
    previous_records: int = 0
    partitions: dict[int, list[int]] = field(default_factory=dict)  # partition -> offsets
    keys_per_partition: dict[int, set[str]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            self.consumed == self.produced
            and not self.missing
            and not self.out_of_order
            and not self.keys_on_two_partitions
        )


def _ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    try:
        future.result(TIMEOUT)
    except KafkaException as error:
        if "already exists" not in str(error).lower():
            raise


def run_demo(
    data_dir: Path, topic: str = "demo-orders", records: int = 3000, partitions: int = 3, keys=8
) -> DemoResult:
    result = DemoResult()
    broker = BrokerProcess(Path(data_dir)).start()
    try:
        started = time.monotonic()
        _ensure_topic(broker.bootstrap, topic, partitions)
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "onceflow-demo"})
        metadata = probe.list_topics(topic, timeout=TIMEOUT).topics[topic]
        start = {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT)[1]
            for p in metadata.partitions
        }
        probe.close()
        result.previous_records = sum(start.values())

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
            }
        )
        acked: dict[int, tuple[int, int]] = {}

        def on_delivery(error, message) -> None:
            if error is None:
                acked[json.loads(message.value())["seq"]] = (message.partition(), message.offset())

        for seq in range(records):
            key = f"store-{seq % keys}"
            value = json.dumps({"store": key, "seq": seq, "amount": (seq * 37) % 100}).encode()
            produce_waiting(producer, topic, key=key.encode(), value=value, on_delivery=on_delivery)
        producer.flush(TIMEOUT)
        del producer  # closed before the broker stops: no disconnect noise
        result.produced = len(acked)

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "onceflow-demo",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
        seen: dict[int, tuple[int, int]] = {}
        last_seq: dict[str, int] = {}
        partition_of_key: dict[str, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < result.produced and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is not None:
                    continue
                body = json.loads(message.value())
                key, seq = body["store"], body["seq"]
                seen[seq] = (message.partition(), message.offset())
                result.partitions.setdefault(message.partition(), []).append(message.offset())
                result.keys_per_partition.setdefault(message.partition(), set()).add(key)
                if seq <= last_seq.get(key, -1):
                    result.out_of_order += 1
                last_seq[key] = seq
                if partition_of_key.setdefault(key, message.partition()) != message.partition():
                    result.keys_on_two_partitions += 1
        consumer.close()
        result.consumed = len(seen)
        result.missing = sum(1 for seq, place in acked.items() if seen.get(seq) != place)
        result.seconds = time.monotonic() - started
    finally:
        broker.stop()
    return result


def print_summary(result: DemoResult, console: Console, data_dir: Path) -> None:
    table = Table(title="onceflow demo: idempotent producer -> embedded broker -> consumer")
    table.add_column("partition", justify="right")
    table.add_column("records", justify="right")
    table.add_column("offsets", justify="right")
    table.add_column("keys")
    for partition in sorted(result.partitions):
        offsets = result.partitions[partition]
        table.add_row(
            str(partition),
            str(len(offsets)),
            f"{min(offsets)}..{max(offsets)}",
            ", ".join(sorted(result.keys_per_partition[partition])),
        )
    console.print(table)
    check = "[green]ok[/green]" if result.ok else "[red]FAILED[/red]"
    console.print(
        f"produced {result.produced} (acks=all, idempotent), consumed {result.consumed} "
        f"in {result.seconds:.1f}s; {result.previous_records} records from earlier runs "
        f"kept in {data_dir}"
    )
    console.print(
        f"missing {result.missing}, out of order per key {result.out_of_order}, "
        f"keys on two partitions {result.keys_on_two_partitions}: {check}"
    )
