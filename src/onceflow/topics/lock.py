"""A cluster-side lock so two topic migrations never interleave.

The lock is a consumer group (``onceflow-topics-lock``) subscribed to a one-partition
topic (``__onceflow_topics_lock``): whoever is assigned partition 0 holds the lock. The
group coordinator guarantees a partition has one owner at a time, and the
cooperative-sticky assignor keeps partition 0 with its owner when another runner joins,
so the newcomer waits until the holder leaves the group (or its session times out, if
it died). Only the Kafka protocol is used, so it works on onceflow's broker and on any
Kafka cluster.

The holder writes who it is (host, pid, user, command, time) to the lock topic, so a
runner that waits, or gives up, can say who holds the lock.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.admin.groups import TOPICS_LOCK_GROUP
from onceflow.topics.cluster import TopicsError, _error_text

LOCK_TOPIC = "__onceflow_topics_lock"
LOCK_GROUP = TOPICS_LOCK_GROUP
HOLDER_KEY = b"holder"


class LockTimeout(TopicsError):
    """Another runner held the lock for longer than the timeout."""

    def __init__(self, message: str, holder: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.holder = holder


class LockLost(TopicsError):
    """The lock was taken away while held (session timeout): stop changing the cluster."""


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another runner (it has not announced itself yet)"
    return (
        f"{holder.get('user', '?')}@{holder.get('host', '?')} pid {holder.get('pid', '?')} "
        f"({holder.get('command', '?')}) since {holder.get('since', '?')}"
    )


class ClusterLock:
    """``with ClusterLock(client_config, timeout=30): ...`` holds the cluster's topics lock."""

    def __init__(
        self,
        client_config: dict[str, str],
        timeout: float = 30.0,
        command: str = "topics",
        on_wait: Callable[[dict[str, Any] | None], None] | None = None,
        session_timeout_ms: int = 10_000,
        join_timeout: float = 60.0,
        request_timeout: float = 30.0,
    ) -> None:
        self.client_config = dict(client_config)
        self.timeout = timeout
        self.command = command
        self.on_wait = on_wait
        self.session_timeout_ms = session_timeout_ms
        self.join_timeout = join_timeout
        self.request_timeout = request_timeout
        self.identity = {
            "owner": str(uuid.uuid4()),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "user": _user(),
            "command": command,
        }
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._joined = threading.Event()
        self._held = threading.Event()
        self._lost = False
        self._poll_error: str | None = None

    # ------------------------------------------------------------------ group callbacks

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(tp.topic == LOCK_TOPIC and tp.partition == 0 for tp in partitions):
            self._held.set()
        self._joined.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(tp.topic == LOCK_TOPIC and tp.partition == 0 for tp in partitions):
            if self._held.is_set() and not self._stop.is_set():
                self._lost = True
            self._held.clear()

    def _poll_loop(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            try:
                self._consumer.poll(0.1)  # serves rebalances; records are ignored
            except KafkaException as error:
                self._poll_error = _error_text(error)
                time.sleep(0.1)

    # ------------------------------------------------------------------ acquire / release

    def _ensure_topic(self) -> None:
        admin = AdminClient(self.client_config)
        topic = NewTopic(LOCK_TOPIC, num_partitions=1, config={"cleanup.policy": "compact"})
        future = admin.create_topics([topic], request_timeout=self.request_timeout)[LOCK_TOPIC]
        try:
            future.result(timeout=self.request_timeout)
        except (KafkaException, TimeoutError) as error:
            if "already exists" not in _error_text(error).lower():
                raise TopicsError(f"cannot create the lock topic: {_error_text(error)}") from None

    def holder(self) -> dict[str, Any] | None:
        """The identity last written to the lock topic, if the lock is currently announced."""
        reader = Consumer(
            {
                **self.client_config,
                "group.id": f"onceflow-topics-lock-reader-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            partition = TopicPartition(LOCK_TOPIC, 0)
            low, high = reader.get_watermark_offsets(partition, timeout=10)
            if high <= low:
                return None
            reader.assign([TopicPartition(LOCK_TOPIC, 0, high - 1)])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                message = reader.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    return None
                value = json.loads(message.value() or b"{}")
                return value if value.get("state") == "held" else None
            return None
        except (KafkaException, ValueError):
            return None
        finally:
            reader.close()

    def _announce(self, state: str) -> None:
        producer = Producer({**self.client_config, "acks": "all", "linger.ms": 0})
        record = {**self.identity, "state": state, "since": _now()}
        producer.produce(LOCK_TOPIC, json.dumps(record).encode(), HOLDER_KEY, partition=0)
        producer.flush(10)

    def acquire(self) -> None:
        self._ensure_topic()
        self._consumer = Consumer(
            {
                **self.client_config,
                "group.id": LOCK_GROUP,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": max(100, self.session_timeout_ms // 30),
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "client.id": f"onceflow-topics-lock-{self.identity['owner']}",
            }
        )
        self._consumer.subscribe(
            [LOCK_TOPIC],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        self._thread = threading.Thread(target=self._poll_loop, name="topics-lock", daemon=True)
        self._thread.start()
        try:
            self._wait_for_partition()
            self._announce("held")
        except BaseException:
            self._shutdown()
            raise

    def _wait_for_partition(self) -> None:
        """Wait until we own partition 0; report the holder meanwhile; honour the timeouts.

        Joining the group is part of the wait: a rebalance completes only when every member
        has rejoined, so a newcomer may not be placed for a while. Give up after ``timeout``
        when someone is known to hold the lock; without a known holder, allow the join
        ``join_timeout`` before calling the group unreachable.
        """
        started = time.monotonic()
        deadline = started + self.timeout
        join_deadline = started + max(self.join_timeout, self.timeout)
        reported: Any = object()

        def pause() -> float:
            remaining = deadline - time.monotonic()
            return min(1.0, max(0.05, remaining)) if remaining > 0 else 1.0

        while not self._held.wait(pause()):
            holder = self.holder()
            if self._held.is_set():
                return
            # Someone else holds the lock only if it is announced, or if the group placed
            # us without partition 0; before that we are still joining (slow on a cluster
            # that has just created the lock topic), and nobody is to be named.
            held_elsewhere = holder is not None or self._joined.is_set()
            if self.on_wait is not None and held_elsewhere and holder != reported:
                self.on_wait(holder)
                reported = holder
            now = time.monotonic()
            if now >= deadline and (self._joined.is_set() or holder is not None):
                raise LockTimeout(
                    f"the topics lock is held by {describe_holder(holder)}; gave up after "
                    f"{self.timeout:g} s (--lock-timeout)",
                    holder,
                )
            if now >= join_deadline:
                detail = f": {self._poll_error}" if self._poll_error else ""
                raise TopicsError(f"could not join the lock group {LOCK_GROUP}{detail}")

    def check(self) -> None:
        """Raise LockLost if the lock was taken away (e.g. our session timed out)."""
        if self._lost or not self._held.is_set():
            raise LockLost(
                "lost the topics lock (session timed out?); stopped before changing more"
            )

    def _shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._consumer is not None:
            try:
                # close() alone sends no LeaveGroup for a cooperative member without
                # partitions (librdkafka): a runner that gave up would stay in the group
                # until its session timed out, stalling every rebalance, so leave first.
                self._consumer.unsubscribe()
                self._consumer.close()  # the next runner gets partition 0
            except (KafkaException, RuntimeError):
                pass
        self._consumer = None
        self._thread = None

    def release(self) -> None:
        try:
            if self._held.is_set():
                self._announce("released")
        finally:
            self._shutdown()
            self._held.clear()

    def __enter__(self) -> ClusterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "?"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
