"""The Runner's settings, checked before anything connects.

``RunnerConfig.validate()`` checks types and ranges and refuses client overrides that
would silently break the guarantee the Runner promises (auto-commit, read_uncommitted, a
non-idempotent producer, ...), naming the setting and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from onceflow.configuration_error import ConfigurationError
from onceflow.patterns.guarantees import CommitTiming, Plan, plan
from onceflow.patterns.records import Decoder, default_event_id, json_decoder

TP = tuple[str, int]

# consumer settings the Runner owns: (setting, the value it needs, why)
CONSUMER_OWNED = (
    ("enable.auto.commit", False,
     "the Runner commits offsets itself, after (or, at most once, before) each batch; "
     "auto-commit would commit records that were not processed yet"),
    ("isolation.level", "read_committed",
     "read_uncommitted hands the handler records of aborted transactions, which never "
     "happened for anyone reading the topic read_committed"),
)  # fmt: skip
CONSUMER_FIELDS = {
    "group.id": "group_id",
    "max.poll.interval.ms": "max_poll_interval_ms",
}
PRODUCER_OWNED = (
    ("enable.idempotence", True,
     "retries of a non-idempotent producer write duplicates and reorder records"),
    ("acks", "all",
     "the Runner commits offsets once outputs are acknowledged; with fewer acks an "
     "acknowledged output can still be lost"),
)  # fmt: skip
PRODUCER_FIELDS = {"transactional.id": "transactional_id"}
TRUE = ("true", "1")
FALSE = ("false", "0")


@dataclass(slots=True)
class RunnerConfig:
    bootstrap_servers: str
    group_id: str
    topics: Sequence[str]
    processing_guarantee: str = "exactly_once"
    pattern: str | None = None  # exactly_once: db_offsets | inbox | kafka_transactions
    database_url: str | None = None
    inbox: bool = False
    outbox: bool = False  # ctx.produce writes outbox rows (publish with `onceflow relay`)
    allow_unsafe_inbox_with_kafka_transactions: bool = False
    assign: Sequence[TP] | bool = False  # True: every partition of the topics; or a list
    transactional_id: str | None = None
    # A stable name for this worker in its group (worker_identity.py): it joins as the
    # static member f"{group_id}-{worker_id}", so a restart after a crash takes the
    # partitions back at once. None: a dynamic member.
    worker_id: str | None = None
    dead_letter_topic: str | None = None
    decode: Decoder = json_decoder
    event_id: Callable[[Message], str] = default_event_id
    batch_size: int = 500
    poll_timeout_s: float = 0.5
    # stop after this long with nothing to do: owning partitions, all read to their end
    idle_exit_s: float | None = None
    max_attempts: int = 3  # handler failures of one record before it is dead-lettered
    retry_backoff_s: float = 0.5
    max_poll_interval_ms: int = 300_000
    lock_timeout_ms: int = 10_000
    statement_timeout_ms: int = 30_000
    commit_async: bool = False
    # Kafka Streams' commit.interval.ms: 0 commits every batch; more lets the batches of
    # that interval share one Kafka transaction (kafka_transactions) or one offset commit
    # (at_least_once and the inbox), at the cost of that much latency.
    commit_interval_ms: int = 0
    committed_timeout_s: float = 10.0
    progress_log_s: float | None = 30.0  # INFO line with rates and lag this often
    consumer_config: dict[str, Any] = field(default_factory=dict)
    producer_config: dict[str, Any] = field(default_factory=dict)
    inbox_table: str = "onceflow_inbox"
    offsets_table: str = "onceflow_offsets"
    outbox_table: str = "onceflow_outbox"

    def validate(self) -> Plan:
        self._check_types()
        self._check_overrides()
        chosen = plan(
            self.processing_guarantee,
            self.pattern,
            inbox=self.inbox,
            has_database=self.database_url is not None,
            allow_unsafe_inbox_with_kafka_transactions=(
                self.allow_unsafe_inbox_with_kafka_transactions
            ),
        )
        if chosen.uses_kafka_transactions and not self.transactional_id:
            raise ConfigurationError("kafka_transactions needs a transactional_id")
        if self.outbox and self.database_url is None:
            raise ConfigurationError("outbox=True needs a database_url")
        if self.outbox and chosen.uses_kafka_transactions:
            raise ConfigurationError(
                "outbox and kafka_transactions are two ways to produce; choose one"
            )
        self._check_commit_interval(chosen)
        self._check_database_timeouts()
        return chosen

    def _check_database_timeouts(self) -> None:
        """A worker waiting on a lock gives up before its group evicts it (the Karafka
        article's first rule); otherwise it is evicted, rejoins and waits again, forever."""
        if self.database_url is None:
            return
        for name in ("lock_timeout_ms", "statement_timeout_ms"):
            value = getattr(self, name)
            if value >= self.max_poll_interval_ms:
                raise ConfigurationError(
                    f"{name}={value} must be below max.poll.interval.ms="
                    f"{self.max_poll_interval_ms} or a worker blocked on a lock is evicted "
                    "from its group in a loop"
                )

    def _check_commit_interval(self, chosen: Plan) -> None:
        if self.commit_interval_ms == 0:
            return
        if chosen.commit is CommitTiming.BEFORE:
            raise ConfigurationError(
                "commit_interval_ms is refused with at_most_once: its offsets are committed "
                "before each batch is processed"
            )
        if chosen.commit is CommitTiming.DATABASE:
            raise ConfigurationError(
                "commit_interval_ms is refused with db_offsets: the offsets commit with "
                "each batch's database transaction"
            )
        if chosen.uses_kafka_transactions:
            setting = self.producer_config.get("transaction.timeout.ms", 60_000)
            try:
                timeout = int(setting)
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"producer_config['transaction.timeout.ms'] must be an integer, got {setting!r}"
                ) from None
            if self.commit_interval_ms >= timeout:
                raise ConfigurationError(
                    f"commit_interval_ms ({self.commit_interval_ms}) must be below the "
                    f"producer's transaction.timeout.ms ({timeout}): the broker aborts a "
                    "transaction open longer than that"
                )

    def _check_types(self) -> None:
        if isinstance(self.topics, str) or not isinstance(self.topics, Sequence):
            raise ConfigurationError(
                f"topics must be a list of topic names, got {self.topics!r} "
                f"(for one topic: topics=[{self.topics!r}])"
            )
        if not self.topics:
            raise ConfigurationError("no topics to consume")
        for topic in self.topics:
            _text("topics[]", topic)
        _text("bootstrap_servers", self.bootstrap_servers)
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ConfigurationError("group_id is required (offsets belong to a group)")
        if self.worker_id is not None:
            _text("worker_id", self.worker_id)
        if self.dead_letter_topic is not None:
            _text("dead_letter_topic", self.dead_letter_topic)
            if self.dead_letter_topic in self.topics:
                raise ConfigurationError(
                    f"dead_letter_topic {self.dead_letter_topic!r} is also an input topic: "
                    "dead letters would be consumed and fail again, forever"
                )
        if not isinstance(self.assign, bool) and not _partition_list(self.assign):
            raise ConfigurationError(
                f"assign must be True, False or a list of (topic, partition), got {self.assign!r}"
            )
        for name in ("batch_size", "max_attempts", "max_poll_interval_ms"):
            _number(name, getattr(self, name), minimum=1, integer=True)
        for name in ("lock_timeout_ms", "statement_timeout_ms", "commit_interval_ms"):
            _number(name, getattr(self, name), minimum=0, integer=True)
        _number("poll_timeout_s", self.poll_timeout_s, minimum=0, exclusive=True)
        _number("committed_timeout_s", self.committed_timeout_s, minimum=0, exclusive=True)
        _number("retry_backoff_s", self.retry_backoff_s, minimum=0)
        for name in ("idle_exit_s", "progress_log_s"):
            if getattr(self, name) is not None:
                _number(name, getattr(self, name), minimum=0, exclusive=True)
        for name in ("consumer_config", "producer_config"):
            if not isinstance(getattr(self, name), Mapping):
                raise ConfigurationError(f"{name} must be a dict of librdkafka settings")

    def _check_overrides(self) -> None:
        _refuse_contradictions("consumer_config", self.consumer_config, CONSUMER_OWNED)
        _refuse_contradictions("producer_config", self.producer_config, PRODUCER_OWNED)
        _refuse_duplicates("consumer_config", self.consumer_config, CONSUMER_FIELDS)
        _refuse_duplicates("producer_config", self.producer_config, PRODUCER_FIELDS)
        if self.worker_id is not None and "group.instance.id" in self.consumer_config:
            raise ConfigurationError(
                "consumer_config['group.instance.id'] and worker_id both name this worker "
                "in its group: keep worker_id (group.instance.id becomes "
                f"'{self.group_id}-{self.worker_id}')"
            )


def _partition_list(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(
            isinstance(tp, tuple | list)
            and len(tp) == 2
            and isinstance(tp[0], str)
            and isinstance(tp[1], int)
            for tp in value
        )
    )


def _text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")


def _number(
    name: str, value: object, *, minimum: float, exclusive: bool = False, integer: bool = False
) -> None:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise ConfigurationError(f"{name} must be {kind}, got {value!r}")
    if not math.isfinite(value) or value < minimum or (exclusive and value == minimum):
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        raise ConfigurationError(f"{name} must be {bound}, got {value!r}")


def _same(value: object, wanted: object) -> bool:
    text = str(value).strip().lower()
    if isinstance(wanted, bool):
        return text in (TRUE if wanted else FALSE)
    if wanted == "all":
        return text in ("all", "-1")
    return text == str(wanted)


def _refuse_contradictions(
    where: str, settings: Mapping[str, Any], owned: tuple[tuple[str, object, str], ...]
) -> None:
    for name, wanted, why in owned:
        if name in settings and not _same(settings[name], wanted):
            raise ConfigurationError(
                f"{where}[{name!r}] = {settings[name]!r} is refused: the Runner needs "
                f"{str(wanted).lower()} because {why}"
            )


def _refuse_duplicates(where: str, settings: Mapping[str, Any], fields: dict[str, str]) -> None:
    for name, field_name in fields.items():
        if name in settings:
            raise ConfigurationError(
                f"{where}[{name!r}] is refused: set RunnerConfig.{field_name} instead "
                "(the Runner uses it for more than the client)"
            )
