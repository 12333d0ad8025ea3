"""How a Runner gets its partitions: assigned by hand, or by its consumer group.

``assign=True`` (or a list) assigns the partitions with their start offsets at once.
Otherwise the Runner subscribes; the group's rebalances call back here: an assignment
seeks to the database offsets (db_offsets), a revoke first commits what is pending (the
partitions' next owner starts there), a loss drops it (the strategy aborts an open Kafka
transaction).
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, TopicPartition

from onceflow.configuration_error import ConfigurationError
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.patterns.runner_consumer import RunnerConsumer
from onceflow.patterns.starting_offsets import StartingOffsets
from onceflow.patterns.strategies import Strategy
from onceflow.patterns.worker_identity import group_instance_id

log = logging.getLogger("onceflow.patterns.runner")
TP = tuple[str, int]


class PartitionAssignment:
    def __init__(
        self,
        consumer: RunnerConsumer,
        strategy: Strategy,
        starts: StartingOffsets,
        config: RunnerConfig,
    ) -> None:
        self.consumer = consumer
        self.strategy = strategy
        self.starts = starts
        self.config = config
        self.closing = False  # set while the consumer closes: a revoke commits nothing then

    def start(self) -> None:
        config = self.config
        if config.assign:
            self._assign_manually()
            return
        instance = group_instance_id(config)
        member = f" as static member {instance}" if instance is not None else ""
        log.info("group %s: subscribed to %s%s; waiting for partitions",
                 config.group_id, list(config.topics), member)  # fmt: skip
        self.consumer.client.subscribe(
            list(config.topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _assign_manually(self) -> None:
        client = self.consumer.client
        if isinstance(self.config.assign, bool):
            partitions = []
            for topic in self.config.topics:
                metadata = client.list_topics(topic, timeout=30).topics[topic]
                if metadata.error is not None:
                    raise ConfigurationError(f"topic {topic!r}: {metadata.error}")
                partitions += [(topic, p) for p in sorted(metadata.partitions)]
        else:
            partitions = list(self.config.assign)
        assignment = self.starts.assignment(partitions)
        self.consumer.progress.assigned(partitions)
        client.assign(assignment)

    def _on_assign(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(tp.topic, tp.partition) for tp in partitions]
        self.consumer.progress.assigned(tps)
        if not self.starts.from_database:
            return  # the group's committed offsets
        assignment = self.starts.assignment(tps)
        if self._incremental:
            client.incremental_assign(assignment)
        else:
            client.assign(assignment)

    @property
    def _incremental(self) -> bool:
        """Rebalances hand over only the partitions that move (and a callback must add
        just those): the cooperative assignor, and every KIP-848 group."""
        settings = self.config.consumer_config
        protocol = str(settings.get("group.protocol", "classic")).lower()
        strategy = str(settings.get("partition.assignment.strategy", ""))
        return protocol == "consumer" or "cooperative" in strategy

    def _on_revoke(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        if not self.closing:  # before the partitions go: their next owner starts there
            self.strategy.commit_pending()
        self.consumer.forget(partitions)

    def _on_lost(self, client: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions taken away without a revoke: their offsets can no longer be committed."""
        self.strategy.partitions_lost([(tp.topic, tp.partition) for tp in partitions])
        self.consumer.forget(partitions)
