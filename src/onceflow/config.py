"""Broker and topic configuration, named and typed like Apache Kafka's."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from onceflow.protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: str  # "int", "long", "double", "bool", "string", "list"
    default: Any
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    sensitive: bool = False


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


TOPIC_CONFIGS: dict[str, ConfigKey] = _keys(
    ConfigKey("cleanup.policy", "list", "delete", choices=("delete", "compact")),
    ConfigKey(
        "compression.type",
        "string",
        "producer",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigKey("delete.retention.ms", "long", 86_400_000, minimum=0),
    ConfigKey("file.delete.delay.ms", "long", 60_000, minimum=0),
    ConfigKey("flush.messages", "long", LONG_MAX, minimum=1),
    ConfigKey("flush.ms", "long", LONG_MAX, minimum=0),
    ConfigKey("index.interval.bytes", "int", 4096, minimum=0),
    ConfigKey("local.retention.bytes", "long", -2, minimum=-2),
    ConfigKey("local.retention.ms", "long", -2, minimum=-2),
    ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, minimum=1),
    ConfigKey("max.message.bytes", "int", 1_048_588, minimum=0),
    ConfigKey("message.timestamp.after.max.ms", "long", 3_600_000, minimum=0),
    ConfigKey("message.timestamp.before.max.ms", "long", LONG_MAX, minimum=0),
    ConfigKey(
        "message.timestamp.type", "string", "CreateTime", choices=("CreateTime", "LogAppendTime")
    ),
    ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, minimum=0),
    ConfigKey("min.compaction.lag.ms", "long", 0, minimum=0),
    ConfigKey("min.insync.replicas", "int", 1, minimum=1),
    ConfigKey("preallocate", "bool", False),
    ConfigKey("remote.storage.enable", "bool", False),
    ConfigKey("retention.bytes", "long", -1),
    ConfigKey("retention.ms", "long", 604_800_000, minimum=-1),
    ConfigKey("segment.bytes", "int", 1_073_741_824, minimum=14),
    ConfigKey("segment.index.bytes", "int", 10_485_760, minimum=4),
    ConfigKey("segment.jitter.ms", "long", 0, minimum=0),
    ConfigKey("segment.ms", "long", 604_800_000, minimum=1),
    ConfigKey("unclean.leader.election.enable", "bool", False),
)

BROKER_CONFIGS: dict[str, ConfigKey] = _keys(
    ConfigKey("broker.id", "int", 0),
    ConfigKey("num.partitions", "int", 1, minimum=1),
    ConfigKey("default.replication.factor", "int", 1, minimum=1),
    ConfigKey("auto.create.topics.enable", "bool", True),
    ConfigKey("delete.topic.enable", "bool", True),
    ConfigKey("log.flush.policy", "string", "always", choices=("always", "interval", "os")),
    ConfigKey("log.flush.interval.ms", "long", 1000, minimum=1),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", "int", 60_000, minimum=1),
    ConfigKey("log.retention.check.interval.ms", "long", 300_000, minimum=1),
    ConfigKey("log.cleaner.backoff.ms", "long", 15_000, minimum=1),
    ConfigKey("log.segment.bytes", "int", 1_073_741_824, minimum=14),
    ConfigKey("log.retention.ms", "long", 604_800_000, minimum=-1),
    ConfigKey("log.retention.bytes", "long", -1),
    ConfigKey("message.max.bytes", "int", 1_048_588, minimum=0),
    ConfigKey("socket.request.max.bytes", "int", 104_857_600, minimum=1),
    ConfigKey("group.min.session.timeout.ms", "int", 6000, minimum=0),
    ConfigKey("group.max.session.timeout.ms", "int", 1_800_000, minimum=0),
    ConfigKey("group.initial.rebalance.delay.ms", "int", 0, minimum=0),
    ConfigKey("offsets.retention.minutes", "int", 10_080, minimum=1),
    ConfigKey("offsets.topic.num.partitions", "int", 1, minimum=1),
    ConfigKey("transaction.state.log.num.partitions", "int", 1, minimum=1),
    ConfigKey("transaction.max.timeout.ms", "int", 900_000, minimum=1),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, minimum=1
    ),
    ConfigKey("transactional.id.expiration.ms", "int", 604_800_000, minimum=1),
    ConfigKey("producer.id.expiration.ms", "int", 86_400_000, minimum=1),
    # Listeners and security (docs/security.md); empty listeners: --host/--port, PLAINTEXT.
    ConfigKey("listeners", "string", ""),
    ConfigKey("advertised.listeners", "string", ""),
    ConfigKey(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    ConfigKey("ssl.keystore.type", "string", "PEM", choices=("PEM",)),
    ConfigKey("ssl.keystore.location", "string", ""),
    ConfigKey("ssl.key.password", "string", "", sensitive=True),
    ConfigKey("ssl.truststore.type", "string", "PEM", choices=("PEM",)),
    ConfigKey("ssl.truststore.location", "string", ""),
    ConfigKey("ssl.client.auth", "string", "none", choices=("none", "requested", "required")),
    ConfigKey(
        "sasl.enabled.mechanisms",
        "list",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    ConfigKey("sasl.plain.users.file", "string", ""),
    ConfigKey("sasl.server.max.receive.size", "int", 524_288, minimum=1),
    ConfigKey("connection.failed.authentication.delay.ms", "int", 100, minimum=0),
    ConfigKey("authorizer.class.name", "string", ""),
    ConfigKey("super.users", "string", ""),
    ConfigKey("allow.everyone.if.no.acl.found", "bool", False),
)

# Topic configs whose broker-wide default comes from a differently named broker key.
TOPIC_DEFAULT_FROM_BROKER = {
    "segment.bytes": "log.segment.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """Turn a string (or already typed) value into the key's type, or raise INVALID_CONFIG."""
    try:
        if key.kind in ("int", "long"):
            if isinstance(raw, bool):
                raise ValueError
            value: Any = int(raw)
        elif key.kind == "double":
            value = float(raw)
        elif key.kind == "bool":
            if isinstance(raw, bool):
                value = raw
            elif str(raw).lower() in ("true", "false"):
                value = str(raw).lower() == "true"
            else:
                raise ValueError
        elif key.kind == "list":
            items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
            value = ",".join(str(item).strip() for item in items if str(item).strip())
        else:
            value = str(raw)
    except (TypeError, ValueError):
        raise KafkaError(
            ErrorCode.invalid_config, f"Invalid value {raw!r} for configuration {key.name}"
        ) from None
    if key.minimum is not None and isinstance(value, int | float) and value < key.minimum:
        raise KafkaError(
            ErrorCode.invalid_config,
            f"Invalid value {raw!r} for configuration {key.name}: must be at least {key.minimum:g}",
        )
    if key.choices:
        items = value.split(",") if key.kind == "list" else [value]
        for item in items:
            if item not in key.choices:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Invalid value {raw!r} for configuration {key.name}: "
                    f"must be one of {', '.join(key.choices)}",
                )
    return value


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ " (did you mean X?)" for the closest known name, or ""."""
    close = difflib.get_close_matches(name, [*known, *TOPIC_CONFIGS], n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class BrokerConfig:
    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_strings(cls, overrides: dict[str, str]) -> BrokerConfig:
        config = cls({name: key.default for name, key in BROKER_CONFIGS.items()})
        for name, raw in overrides.items():
            key = BROKER_CONFIGS.get(name) or TOPIC_CONFIGS.get(name)
            if key is None:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Unknown broker configuration {name}{did_you_mean(name, BROKER_CONFIGS)}",
                )
            config.values[name] = parse_value(key, raw)
        return config

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def topic_default(self, name: str) -> Any:
        if name in self.values:  # a topic config given broker-wide, e.g. segment.bytes
            return self.values[name]
        broker_key = TOPIC_DEFAULT_FROM_BROKER.get(name)
        if broker_key is not None:
            return self.values[broker_key]
        return TOPIC_CONFIGS[name].default


def validate_topic_configs(configs: dict[str, Any]) -> dict[str, Any]:
    """Validate topic-level overrides; return them typed."""
    typed = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if raw is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value for topic config {name}")
        typed[name] = parse_value(key, raw)
    return typed


@dataclass
class TopicConfig:
    """A topic's effective configuration: its overrides on top of the broker defaults."""

    broker: BrokerConfig
    overrides: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        return self.broker.topic_default(name)

    @property
    def compacted(self) -> bool:
        return "compact" in str(self["cleanup.policy"]).split(",")
