"""Transactions left open on purpose, on any engine: a hanging one (a transactional write
its coordinator never heard of: only an abort by hand frees the partition's LSO), and a
live one (a librdkafka producer SIGKILLed inside its transaction, which its coordinator
still knows and will abort when its timeout runs out)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AlterConfigOpType, ResourceType

from tests.kit.clients import admin, alter_configs, config_op, describe_configs

ROOT = Path(__file__).resolve().parents[2]
VERIFICATION = "transaction.partition.verification.enable"
KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3],
                         "transaction.timeout.ms": 600000, "acks": "all"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(sys.argv[2], b"in the killed producer's transaction", partition=1)
    assert producer.flush(30) == 0
    print("open", flush=True)
    time.sleep(600)
    """
)


@contextmanager
def spawned(*command: str) -> Iterator[subprocess.Popen[str]]:
    """A process (run from the repository's root) that is SIGKILLed when the block ends."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)


def first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


def broker_ids(bootstrap: str) -> list[str]:
    return [str(b) for b in admin(bootstrap).list_topics(timeout=10).brokers]


def set_verification(bootstrap: str, enabled: bool) -> None:
    """KIP-890's check of transactional writes, on every broker, and wait until each
    broker applies it (on a cluster it travels through the metadata log)."""
    client = admin(bootstrap)
    operation = AlterConfigOpType.DELETE if enabled else AlterConfigOpType.SET
    for broker in broker_ids(bootstrap):
        alter_configs(
            client, ResourceType.BROKER, broker, config_op(VERIFICATION, "false", operation)
        )
    wanted = "true" if enabled else "false"
    deadline = time.monotonic() + 30
    for broker in broker_ids(bootstrap):
        while describe_configs(client, ResourceType.BROKER, broker)[VERIFICATION].value != wanted:
            assert time.monotonic() < deadline, f"broker {broker} keeps {VERIFICATION}"
            time.sleep(0.1)


def hanging_producer(
    bootstrap: str, topic: str, partition: int, transactional_id: str
) -> tuple[str, ...]:
    """The command of tests/integration/hanging_producer.py (prints ``open CODE OFFSET``)."""
    return (sys.executable, "-m", "tests.integration.hanging_producer", bootstrap, topic,
            str(partition), transactional_id)  # fmt: skip


def leave_hanging(bootstrap: str, topic: str, partition: int, transactional_id: str) -> int:
    """A hanging transaction on ``topic:partition`` (KIP-890's verification turned off for
    the write, on again after); the offset it starts at."""
    set_verification(bootstrap, enabled=False)
    try:
        with spawned(*hanging_producer(bootstrap, topic, partition, transactional_id)) as producer:
            line = first_line(producer)
    finally:
        set_verification(bootstrap, enabled=True)
    _, code, offset = line.split()
    assert code == "0", line
    return int(offset)
