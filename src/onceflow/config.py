"""Broker and topic configuration, named and typed like Apache Kafka's."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from onceflow.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
# listener.name.<listener>.max.connections: one listener's connection limit.
LISTENER_MAX_CONNECTIONS = re.compile(r"listener\.name\.([A-Za-z0-9_]+)\.max\.connections")
# Kafka 3.9's MetadataVersion strings ("0.10.0", "0.10.0.0", "2.8-IV1", "3.0-IV1", ...).
MESSAGE_FORMAT_VERSION = r"(0\.(8|9|10|11)\.\d+(\.\d+)?|[1-3]\.\d+(\.\d+)?)(-IV\d+)?"
THROTTLED_REPLICAS = r"\*|\d+:\d+"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: str  # "int", "long", "double", "bool", "string", "list"
    default: Any
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    sensitive: bool = False
    pattern: str | None = None  # each value (each item of a list) must match it whole


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


TOPIC_CONFIGS: dict[str, ConfigKey] = _keys(
    ConfigKey("cleanup.policy", "list", "delete", choices=("delete", "compact")),
    ConfigKey("compression.gzip.level", "int", -1, minimum=-1),
    ConfigKey("compression.lz4.level", "int", 9, minimum=1),
    ConfigKey(
        "compression.type",
        "string",
        "producer",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigKey("compression.zstd.level", "int", 3, minimum=-131072),
    ConfigKey("delete.retention.ms", "long", 86_400_000, minimum=0),
    ConfigKey("file.delete.delay.ms", "long", 60_000, minimum=0),
    ConfigKey("flush.messages", "long", LONG_MAX, minimum=1),
    ConfigKey("flush.ms", "long", LONG_MAX, minimum=0),
    ConfigKey("follower.replication.throttled.replicas", "list", "", pattern=THROTTLED_REPLICAS),
    ConfigKey("index.interval.bytes", "int", 4096, minimum=0),
    ConfigKey("leader.replication.throttled.replicas", "list", "", pattern=THROTTLED_REPLICAS),
    ConfigKey("local.retention.bytes", "long", -2, minimum=-2),
    ConfigKey("local.retention.ms", "long", -2, minimum=-2),
    ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, minimum=1),
    ConfigKey("max.message.bytes", "int", 1_048_588, minimum=0),
    ConfigKey("message.downconversion.enable", "bool", True),
    ConfigKey("message.format.version", "string", "3.0-IV1", pattern=MESSAGE_FORMAT_VERSION),
    ConfigKey("message.timestamp.after.max.ms", "long", LONG_MAX, minimum=0),
    ConfigKey("message.timestamp.before.max.ms", "long", LONG_MAX, minimum=0),
    ConfigKey("message.timestamp.difference.max.ms", "long", LONG_MAX, minimum=0),
    ConfigKey(
        "message.timestamp.type", "string", "CreateTime", choices=("CreateTime", "LogAppendTime")
    ),
    ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, minimum=0),
    ConfigKey("min.compaction.lag.ms", "long", 0, minimum=0),
    ConfigKey("min.insync.replicas", "int", 1, minimum=1),
    ConfigKey("preallocate", "bool", False),
    ConfigKey("remote.log.copy.disable", "bool", False),
    ConfigKey("remote.log.delete.on.disable", "bool", False),
    ConfigKey("remote.storage.enable", "bool", False),
    ConfigKey("retention.bytes", "long", -1),
    ConfigKey("retention.ms", "long", 604_800_000, minimum=-1),
    ConfigKey("segment.bytes", "int", 1_073_741_824, minimum=14),
    ConfigKey("segment.index.bytes", "int", 10_485_760, minimum=4),
    ConfigKey("segment.jitter.ms", "long", 0, minimum=0),
    ConfigKey("segment.ms", "long", 604_800_000, minimum=1),
    ConfigKey("unclean.leader.election.enable", "bool", False),
)

# Accepted and shown as Kafka 3.9 does, with a warning: Kafka 4.0 removed them.
DEPRECATED_TOPIC_CONFIGS = frozenset(
    {
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.difference.max.ms",
    }
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
    # onceflow's own (docs/metrics.md): Prometheus metrics over HTTP; -1 is off, 0 a free port.
    ConfigKey("metrics.port", "int", -1, minimum=-1),
    ConfigKey("metrics.host", "string", "127.0.0.1"),
    # Connections (docs/broker.md): idle expiry and Kafka's connection limits.
    ConfigKey("connections.max.idle.ms", "long", 600_000),  # negative: never expire
    ConfigKey("max.connections", "int", INT_MAX, minimum=0),
    ConfigKey("max.connections.per.ip", "int", INT_MAX, minimum=0),
    ConfigKey("max.connections.per.ip.overrides", "string", ""),
    ConfigKey("group.min.session.timeout.ms", "int", 6000, minimum=0),
    ConfigKey("group.max.session.timeout.ms", "int", 1_800_000, minimum=0),
    ConfigKey("group.initial.rebalance.delay.ms", "int", 0, minimum=0),
    ConfigKey("group.consumer.session.timeout.ms", "int", 45_000, minimum=1),
    ConfigKey("group.consumer.heartbeat.interval.ms", "int", 5_000, minimum=1),
    ConfigKey("group.consumer.assignors", "list", "uniform,range", choices=("uniform", "range")),
    # onceflow's own, for tests and `onceflow prove` only (docs/groups.md): a member whose
    # coordinator connection closes leaves its group at once instead of at session expiry.
    ConfigKey("onceflow.group.leave.on.disconnect", "bool", False),
    ConfigKey("offsets.retention.minutes", "int", 10_080, minimum=1),
    ConfigKey("offsets.topic.num.partitions", "int", 1, minimum=1),
    ConfigKey("transaction.state.log.num.partitions", "int", 1, minimum=1),
    ConfigKey("transaction.max.timeout.ms", "int", 900_000, minimum=1),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, minimum=1
    ),
    ConfigKey("transactional.id.expiration.ms", "int", 604_800_000, minimum=1),
    ConfigKey("transaction.partition.verification.enable", "bool", True),
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

# Topic configs whose broker-wide default comes from a broker key (Kafka's synonyms).
TOPIC_DEFAULT_FROM_BROKER = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
BROKER_CONFIGS.update(
    {
        broker_name: dataclasses.replace(TOPIC_CONFIGS[topic_name], name=broker_name)
        for topic_name, broker_name in TOPIC_DEFAULT_FROM_BROKER.items()
        if broker_name not in BROKER_CONFIGS
    }
)

# Broker configs IncrementalAlterConfigs may change at runtime (Kafka's dynamic ones that
# onceflow reads live: the topic defaults, the cleaner's pause, KIP-890's verification).
DYNAMIC_BROKER_CONFIGS = frozenset(TOPIC_DEFAULT_FROM_BROKER.values()) | {
    "log.cleaner.backoff.ms",
    "transaction.partition.verification.enable",
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
    items = [item for item in value.split(",") if item] if key.kind == "list" else [value]
    for item in items:
        if key.choices and item not in key.choices:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Invalid value {raw!r} for configuration {key.name}: "
                f"must be one of {', '.join(key.choices)}",
            )
        if key.pattern and not re.fullmatch(key.pattern, str(item)):
            raise KafkaError(
                ErrorCode.invalid_config, f"Invalid value {raw!r} for configuration {key.name}"
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
    values: dict[str, Any] = field(default_factory=dict)  # defaults and --config settings
    static: set[str] = field(default_factory=set)  # the names given with --config
    # Set at runtime (IncrementalAlterConfigs on BROKER): for this broker, and cluster-wide.
    dynamic_broker: dict[str, Any] = field(default_factory=dict)
    dynamic_default: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_strings(cls, overrides: dict[str, str]) -> BrokerConfig:
        config = cls({name: key.default for name, key in BROKER_CONFIGS.items()})
        for name, raw in overrides.items():
            key = BROKER_CONFIGS.get(name) or TOPIC_CONFIGS.get(name)
            if key is None and LISTENER_MAX_CONNECTIONS.fullmatch(name):
                key = ConfigKey(name, "int", INT_MAX, minimum=0)
            if key is None:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Unknown broker configuration {name}{did_you_mean(name, BROKER_CONFIGS)}",
                )
            config.values[name] = parse_value(key, raw)
            config.static.add(name)
        check_connection_limits(config.values)
        return config

    def __getitem__(self, name: str) -> Any:
        if name in self.dynamic_broker:
            return self.dynamic_broker[name]
        if name in self.dynamic_default:
            return self.dynamic_default[name]
        return self.values[name]

    def topic_default(self, name: str) -> Any:
        if name in self.static and name not in BROKER_CONFIGS:
            return self.values[name]  # a topic config given broker-wide, e.g. segment.bytes
        broker_key = TOPIC_DEFAULT_FROM_BROKER.get(name)
        if broker_key is not None:
            return self[broker_key]
        return TOPIC_CONFIGS[name].default


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,host:count`` (an IPv6 address
    keeps its colons: the count follows the last one)."""
    overrides = {}
    for entry in (item.strip() for item in text.split(",")):
        if not entry:
            continue
        host, separator, count = entry.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        try:
            limit = int(count)
        except ValueError:
            limit = -1
        if not separator or not host or limit < 0:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Invalid value {entry!r} in max.connections.per.ip.overrides: "
                "expected host:count with a count of 0 or more",
            )
        overrides[host] = limit
    return overrides


def check_connection_limits(values: dict[str, Any]) -> None:
    overrides = parse_per_ip_overrides(values["max.connections.per.ip.overrides"])
    if values["max.connections.per.ip"] == 0 and not overrides:
        raise KafkaError(
            ErrorCode.invalid_config,
            "max.connections.per.ip=0 would refuse every client: "
            "allow some hosts with max.connections.per.ip.overrides",
        )


def validate_dynamic_broker_configs(configs: dict[str, Any]) -> dict[str, Any]:
    """Validate broker settings changed at runtime; INVALID_REQUEST as Kafka answers."""
    fixed = sorted(name for name in configs if name not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Cannot update these configs dynamically: Set({', '.join(fixed)})",
        )
    typed = {}
    for name, raw in configs.items():
        try:
            typed[name] = parse_value(BROKER_CONFIGS[name], raw)
        except KafkaError as error:
            raise KafkaError(ErrorCode.invalid_request, error.message) from None
    return typed


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
        if name in DEPRECATED_TOPIC_CONFIGS:
            log.warning(
                "Topic configuration %s is deprecated (Kafka 4.0 removed it); accepted and ignored",
                name,
            )
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
