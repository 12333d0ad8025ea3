"""Broker failover on an Apache Kafka cluster: which node to kill, and keeping a worker going.

Shared by the chaos matrix's failover cells (failover_cells.py) and the failover tests
(tests/apache_kafka/test_transactional_failover.py):

* ``victim_node`` — the node leading a partition, or coordinating a transactional id or a
  consumer group;
* ``Supervisor`` — runs a worker to a clean exit as a deployment would: restarts it when it
  exits with an error, SIGKILLs and restarts it when its group's committed offsets stop
  moving (librdkafka can wedge once a coordinator's node died);
* ``probe_acks`` — produce with ``acks=all`` and report what was acknowledged, to show that
  nothing is while too few replicas are alive.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

VICTIMS = ("leader", "transaction_coordinator", "group_coordinator")
# librdkafka's send_offsets_to_transaction can block past its timeout once the group
# coordinator's node died (librdkafka issues 5456, 5511): the worker is then wedged.
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


def victim_node(
    cluster: KafkaCluster,
    victim: str,
    *,
    topic: str = "",
    partition: int = 0,
    group: str = "",
    transactional_id: str = "",
) -> int:
    """The node to kill: ``leader`` of ``topic``'s ``partition``, or the coordinator of
    ``transactional_id`` or of ``group``."""
    if victim == "leader":
        return cluster.leader_of(topic, partition)
    if victim == "transaction_coordinator":
        return cluster.coordinator_of(transactional_id=transactional_id)
    if victim == "group_coordinator":
        return cluster.coordinator_of(group=group)
    raise ValueError(f"unknown victim {victim!r}; known: {', '.join(VICTIMS)}")


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


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


class Supervisor:
    """Keeps one process running to a clean exit, as a deployment would: restarts it when it
    exits with an error, and SIGKILLs and restarts it when ``progress()`` (e.g. the group's
    committed offsets) stops moving for ``stall_seconds`` while it runs (a liveness probe).
    Both are counted: under failover a client may give up or wedge, but a restart must
    never break the audit. ``process``: one already started (e.g. paused at a step)."""

    def __init__(
        self,
        command: list[str],
        log_path: Path,
        progress: Callable[[], int | None],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        process: subprocess.Popen | None = None,
        max_crashes: int = 3,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        self.command = command
        self.log_path = log_path
        self.progress = progress
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.max_crashes = max_crashes
        self.stall_seconds = stall_seconds
        self.crashes: list[int] = []
        self.stalls = 0
        self.process = process if process is not None else self._start()

    def _start(self) -> subprocess.Popen:
        with open(self.log_path, "a") as log:
            return subprocess.Popen(
                self.command, cwd=self.cwd, env=self.env, stdout=log, stderr=log
            )

    def finish(self, timeout: float) -> None:
        """Until the process exits 0; AssertionError if it hangs past ``timeout`` or
        crashes more than ``max_crashes`` times."""
        deadline = time.monotonic() + timeout
        last, moved = self.progress(), time.monotonic()
        while True:
            code = self.process.poll()
            if code == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.command[2]} hung; see {self.log_path}")
            if code is not None:
                self.crashes.append(code)
                if len(self.crashes) > self.max_crashes:
                    raise AssertionError(f"crashed {self.crashes}; see {self.log_path}")
                self.process = self._start()
                moved = time.monotonic()
                continue
            time.sleep(1.0)
            now = self.progress()
            if now is not None and now != last:
                last, moved = now, time.monotonic()
            elif time.monotonic() - moved > self.stall_seconds:
                self.stalls += 1
                self.kill()
                self.process = self._start()
                moved = time.monotonic()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def summary(self) -> str:
        return f"crashes {self.crashes}, stalls killed {self.stalls}"


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
