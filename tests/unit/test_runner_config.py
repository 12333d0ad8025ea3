"""RunnerConfig refuses what would silently break the Runner's guarantee, and bad values."""

from __future__ import annotations

import pytest

from onceflow.patterns import ConfigurationError, RunnerConfig


def config(**changes) -> RunnerConfig:
    settings = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "g", "topics": ["orders"]}
    settings.update(changes)
    return RunnerConfig(**settings, database_url="sqlite:///unused.db", inbox=True)


def refusal(**changes) -> str:
    with pytest.raises(ConfigurationError) as refused:
        config(**changes).validate()
    return str(refused.value)


def test_a_plain_configuration_is_accepted():
    assert config().validate().inbox
    config(consumer_config={"enable.auto.commit": "false", "group.instance.id": "w1"}).validate()
    config(producer_config={"acks": -1, "enable.idempotence": True}).validate()


@pytest.mark.parametrize(
    ("where", "setting", "value", "reason"),
    [
        ("consumer_config", "enable.auto.commit", True, "commits offsets itself"),
        ("consumer_config", "enable.auto.commit", "true", "commits offsets itself"),
        ("consumer_config", "isolation.level", "read_uncommitted", "aborted transactions"),
        ("producer_config", "enable.idempotence", False, "duplicates"),
        ("producer_config", "acks", 1, "acknowledged output can still be lost"),
    ],
)
def test_overrides_that_contradict_the_guarantee_are_refused(where, setting, value, reason):
    message = refusal(**{where: {setting: value}})
    assert message.startswith(f"{where}[{setting!r}] = {value!r} is refused: the Runner needs ")
    assert reason in message


@pytest.mark.parametrize(
    ("where", "setting", "field"),
    [
        ("consumer_config", "group.id", "group_id"),
        ("consumer_config", "max.poll.interval.ms", "max_poll_interval_ms"),
        ("producer_config", "transactional.id", "transactional_id"),
    ],
)
def test_settings_the_runner_owns_are_refused_with_the_field_to_use(where, setting, field):
    assert f"set RunnerConfig.{field} instead" in refusal(**{where: {setting: "x"}})


def test_a_string_for_topics_is_refused_with_the_fix():
    assert refusal(topics="orders") == (
        "topics must be a list of topic names, got 'orders' (for one topic: topics=['orders'])"
    )


def test_a_dead_letter_topic_that_is_an_input_is_refused():
    assert "also an input topic" in refusal(dead_letter_topic="orders")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("poll_timeout_s", -1, "poll_timeout_s must be > 0, got -1"),
        ("poll_timeout_s", 0, "poll_timeout_s must be > 0, got 0"),
        ("poll_timeout_s", "1", "poll_timeout_s must be a number, got '1'"),
        ("batch_size", 0, "batch_size must be >= 1, got 0"),
        ("batch_size", 2.5, "batch_size must be an integer, got 2.5"),
        ("max_attempts", True, "max_attempts must be an integer, got True"),
        ("idle_exit_s", 0, "idle_exit_s must be > 0, got 0"),
        ("retry_backoff_s", float("nan"), "retry_backoff_s must be >= 0, got nan"),
        ("lock_timeout_ms", -5, "lock_timeout_ms must be >= 0, got -5"),
        ("group_id", "", "group_id is required (offsets belong to a group)"),
        ("topics", [], "no topics to consume"),
        ("topics", ["ok", ""], "topics[] must be a non-empty string, got ''"),
        ("assign", "orders", "assign must be True, False or a list of (topic, partition)"),
        ("consumer_config", None, "consumer_config must be a dict of librdkafka settings"),
    ],
)
def test_types_and_ranges_are_checked(field, value, expected):
    assert refusal(**{field: value}).startswith(expected)


def test_a_commit_interval_is_accepted_where_commits_can_wait():
    config(pattern="inbox", commit_interval_ms=100).validate()
    plain = {"processing_guarantee": "at_least_once", "database_url": None, "inbox": False}
    RunnerConfig("127.0.0.1:9092", "g", ["t"], commit_interval_ms=5000, **plain).validate()
    RunnerConfig("127.0.0.1:9092", "g", ["t"], pattern="kafka_transactions",
                 transactional_id="t", commit_interval_ms=100).validate()  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"processing_guarantee": "at_most_once"}, "refused with at_most_once"),
        ({"pattern": "db_offsets", "database_url": "sqlite:///x.db"}, "refused with db_offsets"),
        ({"pattern": "kafka_transactions", "transactional_id": "t", "commit_interval_ms": 60_000},
         r"below the producer's transaction.timeout.ms \(60000\)"),
        ({"pattern": "kafka_transactions", "transactional_id": "t",
          "producer_config": {"transaction.timeout.ms": "1000"}}, r"\(1000\)"),
        ({"pattern": "kafka_transactions", "transactional_id": "t",
          "producer_config": {"transaction.timeout.ms": "soon"}}, "must be an integer"),
        ({"processing_guarantee": "at_least_once", "commit_interval_ms": -1}, ">= 0"),
        ({"processing_guarantee": "at_least_once", "commit_interval_ms": 0.5}, "an integer"),
    ],
)  # fmt: skip
def test_a_commit_interval_is_refused_where_it_cannot_hold(settings, expected):
    settings = {"commit_interval_ms": 1000, **settings}
    with pytest.raises(ConfigurationError, match=expected):
        RunnerConfig("127.0.0.1:9092", "g", ["t"], **settings).validate()
