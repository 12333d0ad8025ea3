"""Kafka's own system-test tools against onceflow's broker: the shape of ``transactions_test``.

Apache Kafka's ``VerifiableProducer`` seeds an input topic (idempotent, ``acks=all``); one
``TransactionalMessageCopier`` per input partition copies it to an output topic in
transactions that also commit the consumed offsets (``--use-group-metadata``), aborting
about one transaction in three on purpose (``--enable-random-aborts``). Meanwhile the
copiers, or the broker, are bounced three times: SIGKILL ("hard"), SIGTERM ("clean"),
SIGKILL again, the broker restarting on the same data directory and port. A read_committed
``VerifiableConsumer`` reads the output while that happens and a second one after; both
must see every input value exactly once, and each output partition must hold its input
partition's values in the input's order (the copier keeps the partition number).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from onceflow.broker.process import BrokerProcess
from tests.integration.java_tools import (
    JavaProcess,
    JavaProcesses,
    kafka_classpath,
    write_properties,
)
from tests.kit.clients import create_topic

TOOLS = "org.apache.kafka.tools."
RECORDS = 3000
KEYS = 100
INPUT_PARTITIONS = 2
OUTPUT_PARTITIONS = 3
TRANSACTION_SIZE = 100
# A copier stopped after adding offsets to its transaction leaves them pending (its shutdown
# hook closes the producer without aborting): its successor's first OffsetFetch
# (require_stable) gets UNSTABLE_OFFSET_COMMIT until that transaction times out, as on
# Kafka, since the copier reads its position before initTransactions could fence the old
# one. Kafka's test uses 40 s everywhere; 10 s keeps copier bounces short.
COPIER_BOUNCE_TIMEOUT_MS = 10_000
BROKER_BOUNCE_TIMEOUT_MS = 40_000
BROKER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
# Each bounce is clean (SIGTERM) or hard (SIGKILL); Kafka's test runs one mode per test.
BOUNCES = (False, True, False)
PROGRESS_TIMEOUT = 90.0


@pytest.fixture
def java(tmp_path: Path) -> Iterator[JavaProcesses]:
    processes = JavaProcesses(kafka_classpath(), tmp_path)
    yield processes
    processes.close()


def seed(java: JavaProcesses, bootstrap: str, tmp_path: Path) -> dict[int, list[str]]:
    """Input values per partition, in offset order, as VerifiableProducer saw them acked."""
    config = write_properties(
        tmp_path / "seed-producer.properties",
        {
            "enable.idempotence": "true",
            "retries": "2147483647",
            "max.in.flight.requests.per.connection": "5",
        },
    )
    producer = java.start(
        TOOLS + "VerifiableProducer",
        [
            *("--topic", "input", "--max-messages", str(RECORDS), "--acks", "-1"),
            # Keys spread the records over both partitions (without, the sticky
            # partitioner may give one copier nearly everything).
            *("--repeating-keys", str(KEYS)),
            *("--bootstrap-server", bootstrap, "--command-config", str(config)),
        ],
        "seed-producer",
    )
    assert producer.wait(120) == 0, f"VerifiableProducer failed; see {producer.log_path}"
    acked = [e for e in producer.events if e.get("name") == "producer_send_success"]
    assert len(acked) == RECORDS, f"{len(acked)} of {RECORDS} seed records acknowledged"
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for event in acked:
        by_partition.setdefault(event["partition"], []).append((event["offset"], event["value"]))
    return {p: [value for _, value in sorted(pairs)] for p, pairs in by_partition.items()}


class Copier:
    """One input partition's TransactionalMessageCopier, restarted after each bounce."""

    def __init__(self, java: JavaProcesses, bootstrap: str, partition: int, timeout_ms: int):
        self.java = java
        self.timeout_ms = timeout_ms
        self.bootstrap = bootstrap
        self.partition = partition
        self.transactional_id = f"copier-{partition}"
        self.starts = 0
        self.process = self._start()

    def _start(self) -> JavaProcess:
        self.starts += 1
        return self.java.start(
            TOOLS + "TransactionalMessageCopier",
            [
                *("--broker-list", self.bootstrap, "--transactional-id", self.transactional_id),
                *("--input-topic", "input", "--input-partition", str(self.partition)),
                *("--output-topic", "output", "--consumer-group", "transactions-test-group"),
                *("--transaction-size", str(TRANSACTION_SIZE)),
                *("--transaction-timeout", str(self.timeout_ms)),
                *("--enable-random-aborts", "--use-group-metadata"),
            ],
            f"{self.transactional_id}-{self.starts}",
        )

    def wait_for_progress(self, percent: float) -> None:
        """Until this instance has committed ``percent`` of what it had left to copy."""

        def enough(events: list[dict[str, Any]]) -> bool:
            status = [e for e in events if "totalProcessed" in e]
            if not status:
                return False
            last = status[-1]
            done, left = last["totalProcessed"], last["remaining"]
            return left == 0 or 100.0 * done / (done + left) >= percent

        self.process.wait_for(enough, PROGRESS_TIMEOUT, f"{percent:.0f}% progress")

    def bounce(self, clean: bool) -> None:
        if clean:
            self.process.stop()
        else:
            self.process.kill()
        self.process = self._start()

    def wait_until_done(self) -> None:
        code = self.process.wait(PROGRESS_TIMEOUT)
        assert code == 0, f"{self.transactional_id} exited {code}; see {self.process.log_path}"
        assert self.process.events[-1].get("stage") == "ShutdownComplete"


def verifiable_consumer(java: JavaProcesses, bootstrap: str, group: str, tmp_path: Path):
    config = write_properties(
        tmp_path / f"{group}.properties", {"isolation.level": "read_committed"}
    )
    return java.start(
        TOOLS + "VerifiableConsumer",
        [
            *("--topic", "output", "--group-id", group, "--verbose", "--reset-policy", "earliest"),
            *("--bootstrap-server", bootstrap, "--command-config", str(config)),
        ],
        group,
    )


def drain(consumer: JavaProcess, count: int) -> dict[int, list[str]]:
    """Output values per partition once ``count`` records arrived (then stops the JVM)."""

    def records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e.get("name") == "record_data"]

    consumer.wait_for(lambda events: len(records(events)) >= count, 120, f"{count} records")
    consumer.stop()
    by_partition: dict[int, list[str]] = {}
    for event in records(consumer.events):
        by_partition.setdefault(event["partition"], []).append(event["value"])
    return by_partition


def committed_output_count(bootstrap: str) -> int:
    """Every committed record of the output, read with read_committed up to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "count-check",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    partitions = [TopicPartition("output", p, 0) for p in range(OUTPUT_PARTITIONS)]
    consumer.assign(partitions)
    count, at_end = 0, set()
    while len(at_end) < OUTPUT_PARTITIONS:
        for message in consumer.consume(1000, 5.0):
            if message.error() is None:
                count += 1
            elif message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
    consumer.close()
    return count


def check_exactly_once(
    name: str, input_values: dict[int, list[str]], output_values: dict[int, list[str]]
) -> None:
    everything_in = [v for values in input_values.values() for v in values]
    everything_out = [v for values in output_values.values() for v in values]
    duplicates = {v: n for v, n in Counter(everything_out).items() if n > 1}
    examples = dict(list(duplicates.items())[:5])
    assert not duplicates, f"{name}: {len(duplicates)} duplicated values, e.g. {examples}"
    missing = set(everything_in) - set(everything_out)
    extra = set(everything_out) - set(everything_in)
    assert not missing and not extra, f"{name}: {len(missing)} missing, {len(extra)} extra"
    for partition, values in input_values.items():
        assert output_values.get(partition) == values, f"{name}: partition {partition} order"


@pytest.mark.parametrize("target", ["copiers", "broker"])
def test_transactions(
    target: str,
    kafka_broker_factory: Callable[..., BrokerProcess],
    java: JavaProcesses,
    tmp_path: Path,
) -> None:
    # The copiers' transactions time out fast where copiers die (their successors wait for
    # that), slowly where the broker restarts (a live copier's transaction must outlast it).
    timeout_ms = COPIER_BOUNCE_TIMEOUT_MS if target == "copiers" else BROKER_BOUNCE_TIMEOUT_MS
    kafka_broker = kafka_broker_factory(BROKER_CONFIG, process=True)
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "input", INPUT_PARTITIONS)
    create_topic(bootstrap, "output", OUTPUT_PARTITIONS)
    input_values = seed(java, bootstrap, tmp_path)

    copiers = [Copier(java, bootstrap, p, timeout_ms) for p in range(INPUT_PARTITIONS)]
    concurrent = verifiable_consumer(java, bootstrap, "concurrent-consumer", tmp_path)
    for number, clean in enumerate(BOUNCES):
        if target == "copiers":  # each new copier copies a fifth of what is left first
            for copier in copiers:
                copier.wait_for_progress(20.0)
                copier.bounce(clean)
        else:  # the copiers keep running: a quarter, a half, three quarters done
            for copier in copiers:
                copier.wait_for_progress(25.0 * (number + 1))
            kafka_broker.restart(kill=not clean)
    for copier in copiers:
        copier.wait_until_done()

    concurrently_consumed = drain(concurrent, RECORDS)
    check_exactly_once("concurrent consumer", input_values, concurrently_consumed)
    after = drain(verifiable_consumer(java, bootstrap, "verifying-consumer", tmp_path), RECORDS)
    check_exactly_once("verifying consumer", input_values, after)
    assert committed_output_count(bootstrap) == RECORDS
