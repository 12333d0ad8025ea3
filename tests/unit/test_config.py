"""Broker and topic configuration parsing."""

from __future__ import annotations

import pytest

from onceflow.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    TopicConfig,
    parse_per_ip_overrides,
    parse_value,
    render_value,
    validate_topic_configs,
)
from onceflow.protocol.errors import ErrorCode, KafkaError


def invalid(function, *args) -> str:
    with pytest.raises(KafkaError) as failure:
        function(*args)
    assert failure.value.code == ErrorCode.invalid_config
    return str(failure.value)


def test_defaults_are_kafkas():
    config = BrokerConfig.from_strings({})
    assert config["num.partitions"] == 1
    assert config["log.flush.policy"] == "always"
    assert config["auto.create.topics.enable"] is True
    topic = TopicConfig(config)
    assert topic["retention.ms"] == 604_800_000
    assert topic["segment.bytes"] == 1_073_741_824
    assert topic["cleanup.policy"] == "delete"
    assert topic["message.timestamp.type"] == "CreateTime"


def test_typed_parsing():
    assert parse_value(TOPIC_CONFIGS["retention.ms"], "123") == 123
    assert parse_value(TOPIC_CONFIGS["retention.ms"], "-1") == -1
    assert parse_value(TOPIC_CONFIGS["preallocate"], "TRUE") is True
    assert parse_value(TOPIC_CONFIGS["min.cleanable.dirty.ratio"], "0.25") == 0.25
    assert parse_value(TOPIC_CONFIGS["cleanup.policy"], " compact , delete ") == "compact,delete"
    assert parse_value(TOPIC_CONFIGS["cleanup.policy"], ["delete"]) == "delete"
    assert render_value(True) == "true" and render_value(5) == "5"


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("retention.ms", "soon"),
        ("retention.ms", "-2"),  # below the minimum
        ("segment.bytes", "10"),
        ("preallocate", "yes"),
        ("cleanup.policy", "shred"),
        ("cleanup.policy", "delete,shred"),
        ("message.timestamp.type", "WallClock"),
        ("retention.bytes", True),
    ],
)
def test_bad_values_are_invalid_config(name, raw):
    message = invalid(parse_value, TOPIC_CONFIGS[name], raw)
    assert name in message


def test_topic_overrides_validated():
    assert validate_topic_configs({"retention.ms": "5", "cleanup.policy": "compact"}) == {
        "retention.ms": 5,
        "cleanup.policy": "compact",
    }
    assert "Unknown topic config" in invalid(validate_topic_configs, {"nope": "1"})
    invalid(validate_topic_configs, {"retention.ms": None})


def test_broker_overrides():
    config = BrokerConfig.from_strings({"num.partitions": "3", "log.flush.policy": "os"})
    assert config["num.partitions"] == 3 and config["log.flush.policy"] == "os"
    invalid(BrokerConfig.from_strings, {"no.such.key": "1"})
    invalid(BrokerConfig.from_strings, {"log.flush.policy": "sometimes"})
    invalid(BrokerConfig.from_strings, {"num.partitions": "0"})


def test_topic_defaults_follow_broker_keys_and_broker_wide_topic_configs():
    by_broker_key = BrokerConfig.from_strings({"log.segment.bytes": "5000"})
    assert TopicConfig(by_broker_key)["segment.bytes"] == 5000
    # A topic config given broker-wide (onceflow's --config segment.bytes=...) is honoured.
    by_topic_name = BrokerConfig.from_strings({"segment.bytes": "4000", "retention.ms": "9"})
    assert TopicConfig(by_topic_name)["segment.bytes"] == 4000
    assert TopicConfig(by_topic_name)["retention.ms"] == 9
    # Topic overrides win over both.
    topic = TopicConfig(by_topic_name, {"segment.bytes": 3000})
    assert topic["segment.bytes"] == 3000


def test_every_key_has_a_parseable_default():
    for key in (*TOPIC_CONFIGS.values(), *BROKER_CONFIGS.values()):
        assert parse_value(key, render_value(key.default)) == key.default


def test_unknown_broker_settings_suggest_the_closest_name():
    assert invalid(BrokerConfig.from_strings, {"num.partition": "3"}) == (
        "Unknown broker configuration num.partition (did you mean num.partitions?)"
    )
    assert invalid(BrokerConfig.from_strings, {"segment.byte": "1024"}).endswith(
        "(did you mean segment.bytes?)"
    )
    assert invalid(BrokerConfig.from_strings, {"colour": "blue"}) == (
        "Unknown broker configuration colour"
    )


def test_connection_settings_have_kafkas_names_and_defaults():
    config = BrokerConfig.from_strings({})
    assert config["connections.max.idle.ms"] == 600_000
    assert config["max.connections"] == config["max.connections.per.ip"] == 2**31 - 1
    assert config["max.connections.per.ip.overrides"] == ""
    config = BrokerConfig.from_strings({"listener.name.sasl_ssl.max.connections": "5"})
    assert config["listener.name.sasl_ssl.max.connections"] == 5


def test_per_ip_overrides_parse_hosts_and_ipv6_addresses():
    assert parse_per_ip_overrides(" 127.0.0.1:2, broker.example:0,[::1]:7,::2:8") == {
        "127.0.0.1": 2,
        "broker.example": 0,
        "::1": 7,
        "::2": 8,
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max.connections": "-1"}, "max.connections: must be at least 0"),
        ({"max.connections.per.ip": "many"}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "expected host:count"),
        ({"max.connections.per.ip.overrides": "127.0.0.1:-1"}, "expected host:count"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip.overrides"),
        ({"listener.name.plaintext.max.connections": "x"}, "listener.name.plaintext"),
        ({"listener.name..max.connections": "1"}, "Unknown broker configuration"),
    ],
)
def test_bad_connection_settings_are_refused_with_the_setting_named(settings, message):
    assert message in invalid(BrokerConfig.from_strings, settings)


def test_zero_per_ip_is_accepted_with_overrides():
    config = BrokerConfig.from_strings(
        {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:10"}
    )
    assert config["max.connections.per.ip"] == 0
