"""All topics and partitions of a broker's data directory, the recovery-point checkpoint,
and the loops that fsync (``group_commit.py``), checkpoint, retain and compact them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceflow.config import BrokerConfig, TopicConfig, validate_topic_configs
from onceflow.log.cleaner import compact_due
from onceflow.log.durability import write_atomically
from onceflow.log.group_commit import GroupCommit
from onceflow.log.partition_log import PartitionLog
from onceflow.log.recovery import QUARANTINE_DIR
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS = 10_000
REGISTRY_FILE = "topics.json"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"  # Kafka's name and format


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"illegal topic name {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not LEGAL_TOPIC_NAME.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' "
            "and '-'",
        )


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    config: TopicConfig
    internal: bool = False
    partitions: list[PartitionLog] = field(default_factory=list)


class LogManager:
    def __init__(self, data_dir: Path, config: BrokerConfig) -> None:
        self.data_dir = data_dir
        self.config = config
        self.topics: dict[str, Topic] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.group_commit = GroupCommit(lambda: self.config["log.flush.policy"] == "always")
        self._recovery_points: dict[tuple[str, int], int] = {}

    # -- registry -------------------------------------------------------------------------

    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        registry_path = self.data_dir / REGISTRY_FILE
        registry: dict[str, Any] = {}
        if registry_path.exists():
            registry = json.loads(registry_path.read_text())
        self._recovery_points = read_recovery_points(self.data_dir / RECOVERY_POINT_FILE)
        for name, entry in registry.get("topics", {}).items():
            topic = Topic(
                name,
                uuid.UUID(entry["id"]),
                TopicConfig(self.config, validate_topic_configs(entry.get("configs", {}))),
                internal=entry.get("internal", False),
            )
            for number in range(entry["partitions"]):
                topic.partitions.append(self._open_partition(topic, number))
            self.topics[name] = topic
            log.info("loaded topic %s with %d partitions", name, entry["partitions"])
        offline = [p.name for p in self.all_partitions() if p.offline]
        if offline:
            # Each was logged at ERROR with its reason; this is the summary.
            log.warning("%d offline partitions: %s", len(offline), ", ".join(offline))

    def all_partitions(self) -> list[PartitionLog]:
        return [partition for topic in self.topics.values() for partition in topic.partitions]

    def write_recovery_points(self) -> None:
        """Record how far each partition is durable (Kafka's recovery-point checkpoint)."""
        write_recovery_point_file(self.data_dir / RECOVERY_POINT_FILE, self._current_points())

    def _current_points(self) -> dict[tuple[str, int], int]:
        """Each partition's durable offset; an offline one keeps the point it was loaded
        with (its damage stays damage)."""
        for partition in self.all_partitions():
            if not partition.offline and not partition.deleted:
                self._recovery_points[(partition.topic, partition.partition)] = (
                    partition.durability.synced.offset
                )
        live = {(p.topic, p.partition) for p in self.all_partitions()}
        points = {key: value for key, value in self._recovery_points.items() if key in live}
        self._recovery_points = points
        return dict(points)

    def _save_registry(self) -> None:
        registry = {
            "topics": {
                topic.name: {
                    "id": str(topic.topic_id),
                    "partitions": len(topic.partitions),
                    "configs": {k: v for k, v in topic.config.overrides.items()},
                    "internal": topic.internal,
                }
                for topic in self.topics.values()
            }
        }
        write_atomically(
            self.data_dir / REGISTRY_FILE,
            json.dumps(registry, indent=1, sort_keys=True).encode(),
        )

    def _open_partition(self, topic: Topic, number: int) -> PartitionLog:
        partition = PartitionLog(
            self.data_dir / f"{topic.name}-{number}",
            topic.name,
            number,
            topic.config,
            recovery_point=self._recovery_points.get((topic.name, number)),
            quarantine_root=self.data_dir / QUARANTINE_DIR,
            on_append=self.group_commit.appended,
        )
        partition.load()
        return partition

    # -- topic administration -------------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name}")
        return topic

    def topic_by_id(self, topic_id: uuid.UUID | None) -> Topic:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        raise KafkaError(ErrorCode.unknown_topic_id, f"unknown topic id {topic_id}")

    def partition(self, topic_name: str, number: int) -> PartitionLog:
        topic = self.get_topic(topic_name)
        if number < 0 or number >= len(topic.partitions):
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {topic_name} has no partition {number}",
            )
        return topic.partitions[number]

    def has_partition(self, topic_partition: tuple[str, int]) -> bool:
        topic = self.topics.get(topic_partition[0])
        return topic is not None and 0 <= topic_partition[1] < len(topic.partitions)

    def check_new_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> dict[str, Any]:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.config["num.partitions"]
        if partitions <= 0 or partitions > MAX_PARTITIONS:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}.",
            )
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor != 1:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Replication factor: {replication_factor} larger than available brokers: 1.",
            )
        typed = validate_topic_configs(configs)
        if typed.get("min.insync.replicas", 1) > replication_factor:
            raise KafkaError(
                ErrorCode.invalid_config,
                "min.insync.replicas cannot exceed the replication factor on a single broker",
            )
        return typed

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, Any] | None = None,
        internal: bool = False,
    ) -> Topic:
        typed = self.check_new_topic(name, partitions, replication_factor, configs or {})
        if partitions == -1:
            partitions = self.config["num.partitions"]
        topic = Topic(name, uuid.uuid4(), TopicConfig(self.config, typed), internal=internal)
        try:
            for number in range(partitions):
                topic.partitions.append(self._new_partition(topic, number))
            self.topics[name] = topic
            self._save_registry()
        except OSError as error:
            self.topics.pop(name, None)
            _delete_partitions(topic.partitions)
            raise _storage_error(f"create topic {name}", error) from None
        self._checkpoint_after(f"creating topic {name}")
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def _checkpoint_after(self, change: str) -> None:
        """The recovery points right after a change of topics (a recreated topic's old
        point must not outlive it); topics.json already holds the change, so a refused
        write is retried by the periodic checkpoint instead of failing the request."""
        self._write_recovery_points_or_log(f"after {change} (the periodic checkpoint retries)")

    def _write_recovery_points_or_log(self, when: str) -> None:
        try:
            self.write_recovery_points()
        except OSError as error:
            log.error("cannot write %s %s: %s", RECOVERY_POINT_FILE, when, error)

    def _new_partition(self, topic: Topic, number: int) -> PartitionLog:
        directory = self.data_dir / f"{topic.name}-{number}"
        if directory.exists():
            shutil.rmtree(directory)
        self._recovery_points.pop((topic.name, number), None)
        return self._open_partition(topic, number)

    def delete_topic(self, name: str) -> None:
        topic = self.get_topic(name)
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        del self.topics[name]
        try:
            self._save_registry()
        except OSError as error:
            self.topics[name] = topic
            raise _storage_error(f"delete topic {name}", error) from None
        for partition in topic.partitions:
            self.group_commit.forget(partition)
            partition.delete()
        self._checkpoint_after(f"deleting topic {name}")
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, total: int) -> None:
        topic = self.get_topic(name)
        current = len(topic.partitions)
        if total <= current:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than or equal to "
                f"the requested {total}.",
            )
        if total > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.invalid_partitions, f"at most {MAX_PARTITIONS} partitions")
        try:
            for number in range(current, total):
                topic.partitions.append(self._new_partition(topic, number))
            self._save_registry()
        except OSError as error:
            added, topic.partitions[current:] = topic.partitions[current:], []
            _delete_partitions(added)
            raise _storage_error(f"add partitions to {name}", error) from None
        self._checkpoint_after(f"adding partitions to {name}")

    def set_topic_configs(self, name: str, overrides: dict[str, Any]) -> None:
        topic = self.get_topic(name)
        before, topic.config.overrides = topic.config.overrides, dict(overrides)
        try:
            self._save_registry()
        except OSError as error:
            topic.config.overrides = before
            raise _storage_error(f"change the configs of {name}", error) from None

    # -- background loops --------------------------------------------------------------

    def start(self) -> None:
        self.group_commit.start()
        if self.config["log.flush.policy"] == "interval":
            self._tasks.append(asyncio.create_task(self._flush_periodically()))
        self._tasks.append(asyncio.create_task(self._checkpoint_recovery_points_periodically()))
        self._tasks.append(asyncio.create_task(self._retention_loop()))
        self._tasks.append(asyncio.create_task(self._cleaner_loop()))

    async def _flush_periodically(self) -> None:
        interval = self.config["log.flush.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            await self.group_commit.flush_all(self.all_partitions())

    async def _checkpoint_recovery_points_periodically(self) -> None:
        interval = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                points = self._current_points()  # on the loop; only the write is not
                path = self.data_dir / RECOVERY_POINT_FILE
                await asyncio.to_thread(write_recovery_point_file, path, points)
            except OSError as error:
                log.warning("cannot write %s: %s", RECOVERY_POINT_FILE, error)

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.enforce_retention()

    async def _cleaner_loop(self) -> None:
        interval = self.config["log.cleaner.backoff.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            self.compact()

    def compact(self) -> int:
        """Compact every compacted topic's closed segments; return the bytes removed."""
        removed = 0
        for topic in list(self.topics.values()):
            if topic.config.compacted:
                try:
                    removed += compact_due(topic.partitions)
                except (OSError, ValueError):
                    log.exception("compaction of %s failed; the log is unchanged", topic.name)
        return removed

    def enforce_retention(self) -> int:
        deleted = 0
        for topic in list(self.topics.values()):
            for partition in topic.partitions:
                deleted += partition.retention.enforce()
        return deleted

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.group_commit.stop(self.all_partitions())

    def close(self) -> None:
        for partition in self.all_partitions():
            partition.close()
        self._write_recovery_points_or_log("at shutdown")


def _storage_error(change: str, error: OSError) -> KafkaError:
    """topics.json refused a change, which was undone in memory: the request fails with
    KAFKA_STORAGE_ERROR and the broker's topics stay as on disk."""
    log.error("cannot %s: writing %s failed: %s", change, REGISTRY_FILE, error)
    return KafkaError(ErrorCode.kafka_storage_error, f"cannot {change}: {error}")


def _delete_partitions(partitions: list[PartitionLog]) -> None:
    """Remove partitions created for a change that did not reach topics.json."""
    for partition in partitions:
        with contextlib.suppress(OSError):
            partition.delete()


def read_recovery_points(path: Path) -> dict[tuple[str, int], int]:
    """Parse Kafka's offset checkpoint format: version, count, then "topic partition offset"."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    points: dict[tuple[str, int], int] = {}
    try:
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("unexpected header")
        for line in lines[2:]:
            topic, number, offset = line.split()
            points[(topic, int(number))] = int(offset)
    except (IndexError, ValueError) as error:
        log.warning("ignoring malformed %s (%s): every partition is fully checked", path, error)
        return {}
    return points


def write_recovery_point_file(path: Path, points: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(points))]
    lines += [f"{topic} {number} {offset}" for (topic, number), offset in sorted(points.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())
