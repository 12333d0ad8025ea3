"""What DescribeConfigs says about each config: value, source, synonyms, as Kafka 3.9 does.

A topic config's synonyms are, in order of precedence, its topic override, then the broker
key it defaults from (Kafka's ``log.*`` names) as set for this broker at runtime, for the
cluster at runtime, with ``--config``, and its default. The first one is the value's source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceflow.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_DEFAULT_FROM_BROKER,
    BrokerConfig,
    TopicConfig,
    render_value,
)

if TYPE_CHECKING:
    from onceflow.broker.core import BrokerCore

# Kafka's DescribeConfigsResponse.ConfigSource ids.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str
    source: int


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str
    source: int
    kind: str
    read_only: bool
    synonyms: tuple[Synonym, ...]
    sensitive: bool = False


def broker_synonyms(config: BrokerConfig, name: str) -> list[Synonym]:
    """Where the broker key ``name`` gets its value, most binding first."""
    found = []
    for layer, source in (
        (config.dynamic_broker, DYNAMIC_BROKER_CONFIG),
        (config.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        if name in layer:
            found.append(Synonym(name, render_value(layer[name]), source))
    if name in config.static:
        found.append(Synonym(name, render_value(config.values[name]), STATIC_BROKER_CONFIG))
    if name in BROKER_CONFIGS:
        found.append(Synonym(name, render_value(BROKER_CONFIGS[name].default), DEFAULT_CONFIG))
    return found


def topic_synonyms(config: TopicConfig, name: str) -> list[Synonym]:
    found = []
    if name in config.overrides:
        found.append(Synonym(name, render_value(config.overrides[name]), DYNAMIC_TOPIC_CONFIG))
    broker = config.broker
    if name in broker.static and name not in BROKER_CONFIGS:  # onceflow: set broker-wide
        found.append(Synonym(name, render_value(broker.values[name]), STATIC_BROKER_CONFIG))
    broker_key = TOPIC_DEFAULT_FROM_BROKER.get(name)
    if broker_key is not None:
        found += broker_synonyms(broker, broker_key)
    return found


def describe_topic_configs(config: TopicConfig, keys: list[str] | None) -> list[DescribedConfig]:
    names = sorted(TOPIC_CONFIGS) if keys is None else [k for k in keys if k in TOPIC_CONFIGS]
    described = []
    for name in names:
        synonyms = topic_synonyms(config, name)
        described.append(
            DescribedConfig(
                name,
                render_value(config[name]),
                synonyms[0].source if synonyms else DEFAULT_CONFIG,
                TOPIC_CONFIGS[name].kind,
                read_only=False,
                synonyms=tuple(synonyms),
            )
        )
    return described


def fixed_broker_settings(broker: BrokerCore) -> dict[str, str]:
    """Read-only broker settings clients and tools look for, as a one-node KRaft Kafka has them."""
    endpoint = f"PLAINTEXT://{broker.advertised_host}:{broker.port}"
    return {
        "advertised.listeners": endpoint,
        "listeners": f"PLAINTEXT://{broker.host}:{broker.port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(broker.data_dir),
        "node.id": str(broker.node_id),
        "process.roles": "broker,controller",
    }


def describe_broker_configs(broker: BrokerCore, keys: list[str] | None) -> list[DescribedConfig]:
    config = broker.config
    fixed = fixed_broker_settings(broker)
    known = sorted({*BROKER_CONFIGS, *fixed})
    names = known if keys is None else [k for k in keys if k in known]
    described = []
    for name in names:
        if name in fixed:
            synonym = Synonym(name, fixed[name], STATIC_BROKER_CONFIG)
            described.append(
                DescribedConfig(name, fixed[name], synonym.source, "string", True, (synonym,))
            )
            continue
        synonyms = broker_synonyms(config, name)
        described.append(
            DescribedConfig(
                name,
                render_value(config[name]),
                synonyms[0].source,
                BROKER_CONFIGS[name].kind,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                synonyms=tuple(synonyms),
                sensitive=BROKER_CONFIGS[name].sensitive,
            )
        )
    return described
