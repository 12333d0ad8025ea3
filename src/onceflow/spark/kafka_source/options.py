"""Options of the ``onceflow`` Spark source, named like Spark's built-in Kafka connector.

Option names are case-insensitive (Spark lower-cases them). Every ``kafka.*`` option is
handed to the confluent-kafka (librdkafka) client with the prefix removed, except the few
that would break the source's guarantees, which are refused with a clear message exactly
like Spark's connector refuses them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from onceflow.spark.common import kafka_client_config, lower_case_options
from onceflow.spark.common import one_line_errors as common_one_line_errors
from onceflow.spark.kafka_source.offsets import EARLIEST, LATEST, parse_offsets_json
from onceflow.spark.leader_change import DEFAULT_UNAVAILABLE_TIMEOUT_MS, KafkaUnavailableError

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

# kafka.* options the source sets itself (Spark's connector refuses the same ones).
_REFUSED_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint; use "
    "'commitOffsetsToGroup' to publish them to a consumer group",
    "key.deserializer": "keys are always returned as binary; cast or decode them in Spark",
    "value.deserializer": "values are always returned as binary; cast or decode them in Spark",
    "interceptor.classes": "Java interceptors do not exist in librdkafka",
    "enable.partition.eof": "the source relies on partition EOF events",
    "enable.auto.offset.store": "the source never stores offsets in the client",
}

_KNOWN = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "maxoffsetspertrigger",
    "minpartitions",
    "failondataloss",
    "includeheaders",
    "commitoffsetstogroup",
    "kafkaconsumer.polltimeoutms",
    "maxrecordsperbatch",
    "unavailabletimeoutms",
    # Accepted for compatibility with Spark's connector; no effect here.
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "groupidprefix",
    "path",
}

# Spark Kafka options we know about but do not implement: fail loudly rather than ignore.
_UNSUPPORTED = {
    "startingoffsetsbytimestamp": "use 'startingOffsets' with explicit offsets",
    "endingoffsetsbytimestamp": "use 'endingOffsets' with explicit offsets",
    "startingtimestamp": "use 'startingOffsets' with explicit offsets",
    "endingtimestamp": "use 'endingOffsets' with explicit offsets",
    "startingoffsetsbytimestampstrategy": "timestamp-based offsets are not supported",
    "minoffsetspertrigger": "only 'maxOffsetsPerTrigger' is supported",
    "maxtriggerdelay": "only 'maxOffsetsPerTrigger' is supported",
    "subscribepatterntype": "not supported",
}


class OnceflowOptionError(ValueError):
    """A source option is missing, unknown or has a bad value."""


def one_line_errors() -> AbstractContextManager[None]:
    """Option errors, and a cluster that stayed unavailable past ``unavailableTimeoutMs``,
    reach the user as their one-line message, without a traceback (see
    ``onceflow.spark.common.one_line_errors``)."""
    return common_one_line_errors(OnceflowOptionError, KafkaUnavailableError)


@dataclass(frozen=True)
class Subscription:
    """What to read: exactly one of topics, pattern or assignment is set."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assignment)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={json.dumps(_assignment_json(self.assignment))}"


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    # "earliest" | "latest" | {(topic, partition): offset} with -2 earliest, -1 latest
    starting_offsets: Any
    ending_offsets: Any
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    isolation_level: str
    include_headers: bool
    group_id: str | None
    commit_offsets_to_group: bool
    poll_timeout_ms: int
    max_records_per_batch: int
    # Every kafka.* option without the prefix (including bootstrap.servers).
    kafka_config: dict[str, str] = field(default_factory=dict)
    # How long a partition without a leader, or an unreachable cluster, is waited for.
    unavailable_timeout_ms: int = DEFAULT_UNAVAILABLE_TIMEOUT_MS

    @property
    def unavailable_timeout_s(self) -> float:
        return self.unavailable_timeout_ms / 1000.0

    def client_config(self) -> dict[str, str]:
        """Config for the driver's metadata/offset clients."""
        config = dict(self.kafka_config)
        config.pop("group.id", None)
        config.pop("isolation.level", None)
        return config


def _assignment_json(assignment: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    result: dict[str, list[int]] = {}
    for topic, partition in assignment:
        result.setdefault(topic, []).append(partition)
    return result


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OnceflowOptionError(f"option '{name}' must be true or false, got {value!r}")


def _positive_int(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OnceflowOptionError(
            f"option '{name}' must be a positive integer, got {value!r}"
        ) from None
    if number <= 0:
        raise OnceflowOptionError(f"option '{name}' must be a positive integer, got {value!r}")
    return number


def _parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in options]
    if len(given) != 1:
        raise OnceflowOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"set (got {len(given)}: {', '.join(given) or 'none'})"
        )
    kind = given[0]
    value = str(options[kind])
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OnceflowOptionError("option 'subscribe' must list at least one topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not value.strip():
            raise OnceflowOptionError("option 'subscribePattern' must not be empty")
        try:
            re.compile(value)
        except re.error as error:
            raise OnceflowOptionError(
                f"option 'subscribePattern' is not a valid regular expression: {error}"
            ) from None
        return Subscription("subscribePattern", pattern=value)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise OnceflowOptionError(
            f'option \'assign\' must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {value!r}'
        )
    pairs: list[tuple[str, int]] = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise OnceflowOptionError(
                f"option 'assign': partitions of topic {topic!r} must be a list of "
                f"non-negative integers, got {partitions!r}"
            )
        pairs.extend((topic, p) for p in partitions)
    return Subscription("assign", assignment=tuple(sorted(set(pairs))))


def _parse_offsets(name: str, value: str | None, default: str, *, batch: bool | None, ending: bool):
    if value is None:
        return default
    text = str(value).strip()
    if text.lower() in (EARLIEST, LATEST):
        spec: Any = text.lower()
    else:
        try:
            spec = parse_offsets_json(text)
        except ValueError as error:
            raise OnceflowOptionError(
                f"option '{name}' must be 'earliest', 'latest' or JSON like "
                f'{{"topicA":{{"0":23,"1":-1}}}} (-2 = earliest, -1 = latest): {error}'
            ) from None
        for (topic, partition), offset in spec.items():
            if offset < -2:
                raise OnceflowOptionError(
                    f"option '{name}': offset {offset} for {topic}-{partition} is invalid "
                    "(use a non-negative offset, -2 for earliest or -1 for latest)"
                )
    if (
        batch
        and not ending
        and (spec == LATEST or (isinstance(spec, dict) and -1 in spec.values()))
    ):
        raise OnceflowOptionError(
            "option 'startingOffsets': latest (or -1) is not allowed for batch queries"
        )
    if ending and (spec == EARLIEST or (isinstance(spec, dict) and -2 in spec.values())):
        raise OnceflowOptionError(
            "option 'endingOffsets': earliest (or -2) is not allowed for batch queries"
        )
    return spec


def parse_options(raw: Mapping[str, str], *, batch: bool | None) -> SourceOptions:
    """Validate the user's options; ``batch`` selects batch-read or streaming rules.

    ``batch=None`` (at ``load()``, before Spark says which kind of query it is) checks
    everything that holds for both kinds.
    """
    options = lower_case_options(raw)

    kafka_config = kafka_client_config(options, _REFUSED_KAFKA, OnceflowOptionError)
    for key in options:
        if key.startswith("kafka."):
            continue
        if key in _UNSUPPORTED:
            raise OnceflowOptionError(f"option '{key}' is not supported: {_UNSUPPORTED[key]}")
        elif key not in _KNOWN:
            raise OnceflowOptionError(
                f"unknown option '{key}' (Kafka client settings need the 'kafka.' prefix, "
                "for example kafka.bootstrap.servers)"
            )

    bootstrap = kafka_config.get("bootstrap.servers", "").strip()
    if not bootstrap:
        raise OnceflowOptionError("option 'kafka.bootstrap.servers' must be set")

    isolation = kafka_config.get("isolation.level", "read_committed").strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise OnceflowOptionError(
            "option 'kafka.isolation.level' must be read_committed or read_uncommitted, "
            f"got {kafka_config['isolation.level']!r}"
        )
    kafka_config["isolation.level"] = isolation

    subscription = _parse_subscription(options)
    starting = _parse_offsets(
        "startingOffsets",
        options.get("startingoffsets"),
        EARLIEST if batch else LATEST,
        batch=batch,
        ending=False,
    )
    if "endingoffsets" in options and batch is False:
        raise OnceflowOptionError("option 'endingOffsets' is only for batch queries")
    ending = _parse_offsets(
        "endingOffsets", options.get("endingoffsets"), LATEST, batch=batch, ending=True
    )
    if "maxoffsetspertrigger" in options and batch:
        raise OnceflowOptionError("option 'maxOffsetsPerTrigger' is only for streaming queries")
    for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
        if isinstance(spec, dict) and subscription.kind != "subscribePattern":
            unknown = sorted({t for t, _ in spec} - _topics_of(subscription))
            if unknown:
                raise OnceflowOptionError(
                    f"option '{name}' names topics that are not read: {', '.join(unknown)}"
                )

    group_id = kafka_config.get("group.id")
    commit_to_group = parse_bool("commitOffsetsToGroup", options.get("commitoffsetstogroup"), False)
    if commit_to_group and not group_id:
        raise OnceflowOptionError("option 'commitOffsetsToGroup' needs 'kafka.group.id'")
    if commit_to_group and batch:
        raise OnceflowOptionError("option 'commitOffsetsToGroup' is only for streaming queries")

    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting_offsets=starting,
        ending_offsets=ending,
        max_offsets_per_trigger=_positive_int(
            "maxOffsetsPerTrigger", options.get("maxoffsetspertrigger")
        ),
        min_partitions=_positive_int("minPartitions", options.get("minpartitions")),
        fail_on_data_loss=parse_bool("failOnDataLoss", options.get("failondataloss"), True),
        isolation_level=isolation,
        include_headers=parse_bool("includeHeaders", options.get("includeheaders"), False),
        group_id=group_id,
        commit_offsets_to_group=commit_to_group,
        poll_timeout_ms=_positive_int(
            "kafkaConsumer.pollTimeoutMs", options.get("kafkaconsumer.polltimeoutms")
        )
        or 120_000,
        max_records_per_batch=_positive_int("maxRecordsPerBatch", options.get("maxrecordsperbatch"))
        or 10_000,
        kafka_config=kafka_config,
        unavailable_timeout_ms=_positive_int(
            "unavailableTimeoutMs", options.get("unavailabletimeoutms")
        )
        or DEFAULT_UNAVAILABLE_TIMEOUT_MS,
    )


def _topics_of(subscription: Subscription) -> set[str]:
    if subscription.kind == "subscribe":
        return set(subscription.topics)
    return {t for t, _ in subscription.assignment}
