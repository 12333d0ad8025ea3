"""All topics and partitions of a broker's data directory, plus group-commit flushing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceflow.config import BrokerConfig, TopicConfig, validate_topic_configs
from onceflow.log.cleaner import compact_due
from onceflow.log.partition_log import PartitionLog
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS = 10_000
REGISTRY_FILE = "topics.json"
FSYNC_THREADS = 4  # partitions fsynced at the same time under log.flush.policy=always


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
        self._dirty: set[PartitionLog] = set()
        self._tasks: list[asyncio.Task[None]] = []
        # Group commit under policy always: at most one fsync per partition in flight;
        # partitions are fsynced concurrently in a small pool of fsync threads, so one
        # partition's fsync never waits behind another's.
        self._flushing: dict[PartitionLog, asyncio.Future[None]] = {}
        self._flush_scheduled = False
        self._fsync_pool: ThreadPoolExecutor | None = None

    # -- registry -------------------------------------------------------------------------

    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        registry_path = self.data_dir / REGISTRY_FILE
        registry: dict[str, Any] = {}
        if registry_path.exists():
            registry = json.loads(registry_path.read_text())
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
        path = self.data_dir / REGISTRY_FILE
        temporary = path.with_suffix(".tmp")
        with open(temporary, "w") as handle:
            json.dump(registry, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        directory_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

    def _open_partition(self, topic: Topic, number: int) -> PartitionLog:
        partition = PartitionLog(
            self.data_dir / f"{topic.name}-{number}", topic.name, number, topic.config
        )
        partition.load()
        return partition

    # -- topic administration -------------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name}")
        return topic

    def partition(self, topic_name: str, number: int) -> PartitionLog:
        topic = self.get_topic(topic_name)
        if number < 0 or number >= len(topic.partitions):
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {topic_name} has no partition {number}",
            )
        return topic.partitions[number]

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
        for number in range(partitions):
            directory = self.data_dir / f"{name}-{number}"
            if directory.exists():
                shutil.rmtree(directory)
            topic.partitions.append(self._open_partition(topic, number))
        self.topics[name] = topic
        self._save_registry()
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.get_topic(name)
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        del self.topics[name]
        self._save_registry()
        for partition in topic.partitions:
            self._dirty.discard(partition)
            partition.delete()
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
        for number in range(current, total):
            directory = self.data_dir / f"{name}-{number}"
            if directory.exists():
                shutil.rmtree(directory)
            topic.partitions.append(self._open_partition(topic, number))
        self._save_registry()

    def set_topic_configs(self, name: str, overrides: dict[str, Any]) -> None:
        topic = self.get_topic(name)
        topic.config.overrides = dict(overrides)
        self._save_registry()

    # -- flushing -------------------------------------------------------------------------

    def start(self) -> None:
        policy = self.config["log.flush.policy"]
        if policy == "always":
            self._fsync_pool = ThreadPoolExecutor(FSYNC_THREADS, thread_name_prefix="fsync")
        elif policy == "interval":
            self._tasks.append(asyncio.create_task(self._flush_periodically()))
        self._tasks.append(asyncio.create_task(self._retention_loop()))
        self._tasks.append(asyncio.create_task(self._cleaner_loop()))

    def mark_dirty(self, partition: PartitionLog) -> None:
        """Ask for an fsync of the partition; one fsync serves every append before it."""
        if self.config["log.flush.policy"] == "always":
            self._dirty.add(partition)
            if not self._flush_scheduled and self._fsync_pool is not None:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._start_flushes)
        else:
            partition.mark_flushed(partition.log_end_offset)

    def _start_flushes(self) -> None:
        """Start an fsync for every dirty partition that has none in flight.

        Runs one loop turn after the appends that marked partitions dirty, so every
        append of that turn shares the fsync. A partition dirtied again while its fsync
        runs waits for that one to end and is then fsynced once for all its new appends.
        """
        self._flush_scheduled = False
        if self._fsync_pool is None:
            return
        loop = asyncio.get_running_loop()
        for partition in list(self._dirty):
            if partition in self._flushing:
                continue
            self._dirty.discard(partition)
            if partition.deleted:
                continue
            done: asyncio.Future[None] = loop.create_future()
            self._flushing[partition] = done
            self._fsync_pool.submit(self._fsync_in_thread, loop, partition, done)

    def _fsync_in_thread(
        self, loop: asyncio.AbstractEventLoop, partition: PartitionLog, done: asyncio.Future[None]
    ) -> None:
        """Runs in an fsync thread; hands the durable offset straight back to the loop."""
        offset = None
        try:
            flushed = _flush_partitions([partition])
            offset = flushed[0][1] if flushed else None
        finally:
            loop.call_soon_threadsafe(self._flushed, partition, offset, done)

    def _flushed(
        self, partition: PartitionLog, offset: int | None, done: asyncio.Future[None]
    ) -> None:
        del self._flushing[partition]
        if offset is not None:
            partition.mark_flushed(offset)
        done.set_result(None)
        if partition in self._dirty and not self._flush_scheduled:
            self._start_flushes()

    async def _flush_periodically(self) -> None:
        interval = self.config["log.flush.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for topic in list(self.topics.values()):
                self._dirty.update(p for p in topic.partitions if p.dirty)
            await self._flush_dirty()

    async def _flush_dirty(self) -> None:
        """fsync every dirty partition now (after any fsync already in flight)."""
        while self._flushing:
            await asyncio.gather(*self._flushing.values())
        batch = [partition for partition in self._dirty if not partition.deleted]
        self._dirty.clear()
        if not batch:
            return
        results = await asyncio.to_thread(_flush_partitions, batch)
        for partition, offset in results:
            partition.mark_flushed(offset)

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
                deleted += partition.enforce_retention()
        return deleted

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self._flush_dirty()
        if self._fsync_pool is not None:
            self._fsync_pool.shutdown(wait=True)
            self._fsync_pool = None

    def close(self) -> None:
        for topic in self.topics.values():
            for partition in topic.partitions:
                partition.close()


def _flush_partitions(partitions: list[PartitionLog]) -> list[tuple[PartitionLog, int]]:
    flushed = []
    for partition in partitions:
        try:
            flushed.append((partition, partition.flush()))
        except OSError as error:  # deleted meanwhile, or a disk error
            if not partition.deleted:
                log.error("fsync of %s-%d failed: %s", partition.topic, partition.partition, error)
    return flushed
