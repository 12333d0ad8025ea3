"""What the Runner has done and where it stands: counters, lag, idleness, INFO logs.

``RunStats`` are the counters (a Python API, and Prometheus metrics through
``onceflow.patterns.metrics``). ``Progress`` follows the consumer: which partitions it owns,
which it has read to their end (librdkafka's partition EOF events), so the Runner knows
when it is idle (owning partitions, every one read to its end, nothing paused) as opposed
to waiting for an assignment; and it logs that state at INFO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

log = logging.getLogger("onceflow.patterns.runner")
TP = tuple[str, int]
WAITING_LOG_S = 10.0  # how often "still waiting for partitions" is repeated


@dataclass(slots=True)
class RunStats:
    records: int = 0  # records consumed (each again after a rewind)
    batches: int = 0
    processed: int = 0  # records the handler completed
    commits: int = 0  # batches whose offsets were committed (Kafka, database or transaction)
    retries: int = 0  # batches rolled back and read again (handler or database failure)
    duplicates_skipped: int = 0
    stale_skipped: int = 0
    dead_lettered: int = 0
    aborted: int = 0
    commit_failures: int = 0
    lag: int | None = None  # records behind the end of the owned partitions (None: unknown)
    owned_partitions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(partitions: Iterable[TP]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or "none"


class Progress:
    def __init__(self, stats: RunStats, group: str, log_every_s: float | None) -> None:
        self.stats = stats
        self.group = group
        self.log_every_s = log_every_s
        self.owned: set[TP] = set()
        self.at_end: set[TP] = set()
        started = time.monotonic()
        self._waiting_since: float | None = started
        self._waiting_logged = started
        self._idle_since: float | None = None
        self._window = (started, 0, 0)  # (since, records, batches) of the last progress line

    # -- the consumer's state -----------------------------------------------------------

    def assigned(self, partitions: Iterable[TP]) -> None:
        new = set(partitions) - self.owned
        self.owned |= new
        self.stats.owned_partitions = len(self.owned)
        if new:
            waited = time.monotonic() - (self._waiting_since or time.monotonic())
            log.info("assigned %s (after %.1f s)", describe(new), waited)
        self._waiting_since = None

    def revoked(self, partitions: Iterable[TP]) -> None:
        gone = set(partitions) & self.owned
        self.owned -= gone
        self.at_end -= gone
        self.stats.owned_partitions = len(self.owned)
        if gone:
            log.info("revoked %s", describe(gone))
        if not self.owned:
            self._waiting_since = self._waiting_logged = time.monotonic()

    def consumed(self, tp: TP) -> None:
        """A record of ``tp`` came: it is not at its end."""
        self.at_end.discard(tp)

    def counted(self, records: int) -> None:
        self.stats.records += records

    def reached_end(self, tp: TP) -> None:
        if tp in self.owned:
            self.at_end.add(tp)

    def rewound(self, partitions: Iterable[TP]) -> None:
        self.at_end -= set(partitions)

    # -- idleness and logs --------------------------------------------------------------

    def idle_for(self, paused: bool) -> float:
        """Seconds the Runner has owned partitions, all read to their end, nothing paused."""
        now = time.monotonic()
        if not self.owned or paused or not self.owned <= self.at_end:
            self._idle_since = None
            return 0.0
        if self._idle_since is None:
            self._idle_since = now
            self.stats.lag = 0
        return now - self._idle_since

    def tick(self, consumer: Consumer | None) -> None:
        """Log "waiting for partitions" or the progress line when they are due."""
        now = time.monotonic()
        if self._waiting_since is not None and now - self._waiting_logged >= WAITING_LOG_S:
            self._waiting_logged = now
            log.info(
                "group %s: still waiting for partitions after %.0f s (a rebalance waits "
                "for members that left without leaving; a restarted worker takes its "
                "place at once with RunnerConfig.worker_id)",
                self.group,
                now - self._waiting_since,
            )
        since, records, batches = self._window
        if self.log_every_s is None or now - since < self.log_every_s:
            return
        if consumer is not None:
            self.measure_lag(consumer)
        done = self.stats.records - records
        log.info(
            "%d records in %d batches in the last %.0f s (%.0f records/s); lag %s; owning %s",
            done,
            self.stats.batches - batches,
            now - since,
            done / (now - since),
            "unknown" if self.stats.lag is None else self.stats.lag,
            describe(self.owned),
        )
        self._window = (now, self.stats.records, self.stats.batches)

    def measure_lag(self, consumer: Consumer) -> None:
        """Records between each owned partition's position and its (cached) end."""
        behind = [tp for tp in self.owned if tp not in self.at_end]
        if not behind:
            self.stats.lag = 0 if self.owned else None
            return
        try:
            positions = consumer.position([TopicPartition(t, p) for t, p in behind])
            lag = 0
            for position in positions:
                _, high = consumer.get_watermark_offsets(position, cached=True)
                if position.offset < 0 or high < 0:
                    self.stats.lag = None
                    return
                lag += max(high - position.offset, 0)
            self.stats.lag = lag
        except KafkaException:
            self.stats.lag = None
