"""A cluster's topics through confluent-kafka's AdminClient (onceflow's broker or Kafka)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import AdminError
from onceflow.topics.plan import ActualConfig, ActualTopic, ClusterState, ConfigChange
from onceflow.topics.spec import Spec, TopicSpec


class TopicsError(RuntimeError):
    """A cluster operation failed (the message says which topic and why)."""


class ClusterUnreachable(TopicsError):
    """No broker of the cluster answered."""


def _error_text(error: Any) -> str:
    if isinstance(error, TimeoutError):
        return "no answer in time (is the cluster reachable?)"
    inner = error.args[0] if isinstance(error, KafkaException) and error.args else error
    text = inner.str() if hasattr(inner, "str") else str(inner)
    name = inner.name() if hasattr(inner, "name") else ""
    return f"{text} ({name})" if name and name not in text else text


class Cluster:
    """Admin operations with blocking calls and readable errors."""

    def __init__(
        self, bootstrap: str, client_config: dict[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.bootstrap = bootstrap
        # log_level 4: keep librdkafka's informational teardown lines off stderr
        self.client_config = {
            "bootstrap.servers": bootstrap,
            "log_level": 4,
            **(client_config or {}),
        }
        self.timeout = timeout
        self.session = ClusterSession(self.client_config, timeout)
        self.admin: AdminClient = self.session.admin
        self.brokers: int | None = None  # known once the topics were read

    # ------------------------------------------------------------------ reading

    def topic_partitions(self) -> dict[str, tuple[int, int]]:
        """name -> (partitions, replication factor) for every topic on the cluster."""
        try:
            metadata = self.session.list_topics()
        except AdminError as error:
            reason = str(error).removeprefix(f"cannot reach {self.bootstrap}: ")
            raise ClusterUnreachable(f"cannot reach {self.bootstrap}: {reason}") from None
        self.brokers = len(metadata.brokers)
        result = {}
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                continue
            partitions = topic.partitions
            replicas = len(partitions[min(partitions)].replicas) if partitions else 0
            result[name] = (len(partitions), replicas)
        return result

    def describe_configs(self, names: Iterable[str]) -> dict[str, dict[str, ActualConfig]]:
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
        if not resources:
            return {}
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout)
        result = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=self.timeout)
            except (KafkaException, TimeoutError) as error:
                raise TopicsError(
                    f"{resource.name}: cannot describe configs: {_error_text(error)}"
                ) from None
            result[resource.name] = {
                name: ActualConfig(
                    entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                )
                for name, entry in entries.items()
            }
        return result

    def sample_keys(self, name: str, partitions: int, per_partition: int = 5) -> tuple[int, bool]:
        """(records on the topic, whether any of the newest records carries a key)."""
        consumer = Consumer(
            {
                **self.client_config,
                "group.id": f"onceflow-topics-probe-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
                "enable.partition.eof": True,
            }
        )
        try:
            records, assignment = 0, []
            for partition in range(partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(name, partition), timeout=self.timeout
                )
                records += max(0, high - low)
                if high > low:
                    assignment.append(
                        TopicPartition(name, partition, max(low, high - per_partition))
                    )
            if not assignment:
                return records, False
            consumer.assign(assignment)
            pending = {tp.partition for tp in assignment}
            deadline = time.monotonic() + 5.0
            while pending and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    pending.discard(message.partition())
                    continue
                if message.key() is not None:
                    return records, True
            return records, False
        except KafkaException as error:
            raise TopicsError(f"{name}: cannot sample records: {_error_text(error)}") from None
        finally:
            consumer.close()

    def state(self, spec: Spec) -> ClusterState:
        """Every topic's partitions and replication; configs and key samples where needed."""
        layout = self.topic_partitions()
        declared = [topic for topic in spec if topic.name in layout]
        configs = self.describe_configs(topic.name for topic in declared)
        topics = {}
        for name, (partitions, replication) in layout.items():
            topics[name] = ActualTopic(name, partitions, replication, configs.get(name, {}))
        for topic in declared:
            actual = topics[topic.name]
            if topic.partitions > actual.partitions:
                records, keyed = self.sample_keys(topic.name, actual.partitions)
                topics[topic.name] = ActualTopic(
                    actual.name,
                    actual.partitions,
                    actual.replication_factor,
                    actual.configs,
                    records,
                    keyed,
                )
        return ClusterState(topics, self.brokers)

    # ------------------------------------------------------------------ writing

    def _wait(self, futures: dict[Any, Any], what: str) -> None:
        failures = []
        for key, future in futures.items():
            try:
                future.result(timeout=self.timeout)
            except (KafkaException, TimeoutError) as error:
                name = getattr(key, "name", key)
                failures.append(f"{name}: cannot {what}: {_error_text(error)}")
        if failures:
            raise TopicsError("\n".join(failures))

    def create(self, topics: list[TopicSpec], retry_for: float = 0.0) -> None:
        """Create topics; ``retry_for`` seconds rides out a deletion still in progress."""
        pending = list(topics)
        deadline = time.monotonic() + retry_for
        while pending:
            new = [
                NewTopic(
                    topic.name,
                    num_partitions=topic.partitions,
                    replication_factor=topic.replication_factor or -1,
                    config=topic.set_configs,
                )
                for topic in pending
            ]
            futures = self.admin.create_topics(new, request_timeout=self.timeout)
            retry, failures = [], []
            for topic in pending:
                try:
                    futures[topic.name].result(timeout=self.timeout)
                except (KafkaException, TimeoutError) as error:
                    if "already exists" in _error_text(error).lower() and (
                        time.monotonic() < deadline
                    ):
                        retry.append(topic)
                    else:
                        failures.append(f"{topic.name}: cannot create: {_error_text(error)}")
            if failures:
                raise TopicsError("\n".join(failures))
            pending = retry
            if pending:
                time.sleep(0.5)

    def delete(self, names: list[str]) -> None:
        if not names:
            return
        self._wait(self.admin.delete_topics(names, request_timeout=self.timeout), "delete")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:  # Kafka deletes asynchronously
            if not set(names) & set(self.topic_partitions()):
                return
            time.sleep(0.3)

    def add_partitions(self, totals: dict[str, int]) -> None:
        if totals:
            new = [NewPartitions(name, total) for name, total in totals.items()]
            futures = self.admin.create_partitions(new, request_timeout=self.timeout)
            self._wait(futures, "add partitions")

    def alter_configs(self, changes: dict[str, tuple[ConfigChange, ...]]) -> None:
        resources = []
        for name, items in changes.items():
            entries = [
                ConfigEntry(
                    change.name,
                    change.wanted,
                    incremental_operation=(
                        AlterConfigOpType.DELETE if change.wanted is None else AlterConfigOpType.SET
                    ),
                )
                for change in items
            ]
            resources.append(ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries))
        if resources:
            futures = self.admin.incremental_alter_configs(resources, request_timeout=self.timeout)
            self._wait(futures, "alter configs")
