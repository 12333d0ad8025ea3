"""Whether a partition serves: online, offline (and why), deleted; and its storage failures.

A partition goes offline once, logged at ERROR with the first reason, and then serves
nothing: every request waiting for its durability fails with KAFKA_STORAGE_ERROR. A read
of a partition offline because its stored data is damaged answers CORRUPT_MESSAGE, as
Kafka answers a fetch that reaches a corrupt batch: clients report it (librdkafka's
consumer as a poll() error, the Java consumer as a KafkaException) where they would retry
KAFKA_STORAGE_ERROR in silence.

Write and fsync failures come in episodes (a full disk stays full for a while): the first
failure of an episode is logged with its path and errno, and the end of the episode once.
"""

from __future__ import annotations

import logging

from onceflow.log.durable_offsets import DurableWaiters, NewDataWaiters
from onceflow.log.segment import SegmentDamaged
from onceflow.log.tail_recovery import damage_reason
from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def storage_error(message: str) -> KafkaError:
    return KafkaError(ErrorCode.kafka_storage_error, message)


class PartitionStatus:
    def __init__(
        self, topic: str, name: str, durable: DurableWaiters, new_data: NewDataWaiters
    ) -> None:
        self.topic = topic
        self.name = name
        self.offline: str | None = None  # why the partition is offline, if it is
        self.damaged = False  # offline because its stored data is damaged
        self.deleted = False
        self._durable = durable
        self._new_data = new_data
        self._failing: str | None = None  # the storage error of the current episode

    def go_offline(self, reason: str, damaged: bool = False) -> None:
        """Serve nothing more from this partition; logged once, at ERROR (the first reason
        stays the reason). ``damaged``: because its stored data is damaged."""
        if self.offline:
            return
        self.offline = reason
        self.damaged = damaged
        log.error("partition %s is offline: %s", self.name, reason)
        self._durable.fail_above(-1, storage_error(f"partition {self.name} is offline: {reason}"))
        self._new_data.notify()

    def require_online(self, reading: bool = False) -> None:
        """Raise KafkaError(KAFKA_STORAGE_ERROR) if the partition is offline; a read of a
        partition offline for damaged data gets CORRUPT_MESSAGE."""
        if not self.offline:
            return
        message = f"partition {self.name} is offline: {self.offline}"
        if reading and self.damaged:
            raise KafkaError(ErrorCode.corrupt_message, message)
        raise storage_error(message)

    def require_writable(self) -> None:
        if self.deleted:
            raise self.deleted_error()
        self.require_online()

    def deleted_error(self) -> KafkaError:
        return KafkaError(ErrorCode.unknown_topic_or_partition, f"{self.topic} was deleted")

    def offline_error(self) -> KafkaError | None:
        return storage_error(self.offline) if self.offline else None

    def found_damage(self, damage: SegmentDamaged, doing: str) -> KafkaError:
        """Take the partition offline for damage found on disk; the error to answer."""
        self.go_offline(
            damage_reason(
                damage.problem,
                damage.path,
                damage.position,
                f"while serving {doing}",
                "acknowledged data is damaged; this partition serves nothing until repaired",
            ),
            damaged=True,
        )
        return KafkaError(
            ErrorCode.corrupt_message, f"partition {self.name} is offline: {self.offline}"
        )

    # -- storage failure episodes ---------------------------------------------------------

    def write_failed(self, error: OSError) -> KafkaError:
        """Log the first failure of an episode (path, errno); the error to answer."""
        message = f"cannot write to {self.name}: {error}"
        if self._failing is None:
            log.error("%s; the request is refused and nothing of it is kept", message)
        self._failing = message
        return storage_error(message)

    def write_succeeded(self) -> None:
        if self._failing is not None:
            log.warning("%s: writes succeed again (after: %s)", self.name, self._failing)
            self._failing = None

    def fsync_failed(self, message: str) -> bool:
        """Record a failed fsync; whether it is news (not the episode's last failure)."""
        news = self._failing != message
        self._failing = message
        return news

    def fsync_succeeded(self) -> None:
        if self._failing is not None and self._failing.startswith("fsync"):
            log.warning("%s: fsync succeeds again", self.name)
            self._failing = None
