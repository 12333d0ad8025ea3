"""Pure logic of the Apache Kafka launcher: coordinator partitions, failure causes."""

from __future__ import annotations

from onceflow.kafka_cluster import coordinator_partition, default_properties
from onceflow.kafka_cluster.jars import maven_error
from onceflow.kafka_cluster.node import failure_cause


def test_coordinator_partition_is_javas_string_hash_code():
    assert coordinator_partition("hello", 1 << 30) == 99162322  # "hello".hashCode()
    assert coordinator_partition("", 5) == 0
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; Kafka's Utils.abs makes it 0.
    assert coordinator_partition("polygenelubricants", 7) == 0
    # "Aa" and "BB" collide in Java; a non-BMP character counts as two UTF-16 units.
    assert coordinator_partition("Aa", 50) == coordinator_partition("BB", 50) == 2112 % 50
    assert coordinator_partition("\U0001f600", 1 << 30) == (55357 * 31 + 56832)


def test_a_bind_failure_names_the_address():
    log = (
        "[2026-11-25 20:40:01,123] ERROR Exiting Kafka due to fatal exception during "
        "startup. (kafka.Kafka$)\n"
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to "
        "127.0.0.1:19555: Address already in use.\n"
        "\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:700)\n"
        "Caused by: java.net.BindException: Address already in use\n"
    )
    assert failure_cause(log, "java") == "127.0.0.1:19555 is already in use"


def test_an_old_java_and_missing_jars_are_named():
    old = "Exception in thread main java.lang.UnsupportedClassVersionError: kafka/Kafka ..."
    assert "needs Java 17 or newer" in failure_cause(old, "/usr/bin/java")
    missing = "Error: Could not find or load main class kafka.Kafka"
    assert "jars are missing" in failure_cause(missing, "java")


def test_otherwise_the_first_exception_message_without_its_trace():
    log = (
        "[x] INFO starting\n"
        "org.apache.kafka.common.config.ConfigException: Invalid value x for configuration "
        "num.partitions: Not a number of type INT\n"
        "\tat org.apache.kafka.common.config.ConfigDef.parseType(ConfigDef.java:1)\n"
    )
    assert failure_cause(log, "java") == (
        "Invalid value x for configuration num.partitions: Not a number of type INT"
    )


def test_maven_error_is_the_first_error_line_without_colours_or_help():
    output = (
        "\x1b[0m\x1b[0m[ERROR] No plugin found for prefix 'dependency' -> [Help 1]\n"
        "[ERROR] \n[ERROR] To see the full stack trace of the errors, re-run Maven\n"
    )
    assert maven_error(output) == "No plugin found for prefix 'dependency'"


def test_replication_settings_follow_the_node_count():
    three, one = default_properties(3), default_properties(1)
    assert three["default.replication.factor"] == "3"
    assert three["min.insync.replicas"] == "2"
    assert three["transaction.state.log.min.isr"] == "2"
    assert one["offsets.topic.replication.factor"] == "1"
    assert one["min.insync.replicas"] == "1"


def test_only_a_node_with_peers_is_fenced_after_seconds():
    """A single node fenced by its own controller (a starved JVM missing heartbeats for
    6 s) left its partitions leaderless: the differential tests' Kafka, 2026-12-06."""
    assert default_properties(3)["broker.session.timeout.ms"] == "6000"
    assert default_properties(1)["broker.session.timeout.ms"] == "60000"
