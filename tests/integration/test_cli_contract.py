"""The exit-code and error contract of the cluster commands, case by case (issue 24).

0 success; 1 anomalies or an unknown name; 2 could not reach or check; 3 not authorized
(tests/integration/security/test_cli_security.py). One broker for the module; every test
makes its own topics and groups. The authorization and security cases need a broker with
listeners and an authorizer and live in tests/integration/security/test_cli_security.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from onceflow.cli import main
from onceflow.ports import free_port
from onceflow.testing import unique_name
from tests.integration.console_script import onceflow
from tests.kit.clients import new_topic, produce


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture(scope="module")
def bootstrap(kafka_module_broker) -> str:
    return kafka_module_broker.bootstrap


def topic_with_records(bootstrap: str, prefix: str, records: int = 0, partitions: int = 1) -> str:
    """A topic of its own, holding ``records`` JSON records on partition 0."""
    name = new_topic(bootstrap, prefix, partitions)
    if records:
        values = [json.dumps({"id": n}) for n in range(records)]
        produce(bootstrap, name, values, partition=0, keys=[f"k{n}" for n in range(records)])
    return name


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


# ------------------------------------------------------------------------ groups


def test_reset_offsets_all_topics_of_an_unknown_group_is_exit_1(bootstrap):
    result = invoke(
        "groups", "reset-offsets", "nosuchgroup", "--all-topics", "--to-earliest",
        "--bootstrap", bootstrap,
    )  # fmt: skip
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith("error: consumer group 'nosuchgroup' does not exist")


def test_reset_offsets_of_a_new_group_by_topic_is_still_allowed(bootstrap):
    """Kafka lets --topic give a group that never committed its first offsets."""
    topic = topic_with_records(bootstrap, "fresh", records=3)
    result = invoke(
        "groups", "reset-offsets", unique_name("new"), "--topic", topic, "--to-latest",
        "--bootstrap", bootstrap, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert [r["new"] for r in json.loads(result.stdout)["offsets"]] == [3]


def test_reset_offsets_past_the_log_says_it_was_clamped(bootstrap):
    topic = topic_with_records(bootstrap, "clamp", records=5)
    group = unique_name("clamp")
    commit(bootstrap, group, topic, 2)
    b = ("--bootstrap", bootstrap)
    table = invoke("groups", "reset-offsets", group, "--topic", topic, "--to-offset", "99", *b)
    assert table.exit_code == 0, table.stderr
    assert "99 is past the log end: clamped to 5" in table.stdout
    assert "1 partition(s) clamped" in table.stdout
    plan = invoke(
        "groups", "reset-offsets", group, "--topic", topic, "--to-offset", "99", "--json", *b
    )
    (reset,) = json.loads(plan.stdout)["offsets"]
    assert (reset["new"], reset["note"]) == (5, "99 is past the log end: clamped to 5")
    inside = invoke(
        "groups", "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--json", *b
    )
    assert json.loads(inside.stdout)["offsets"][0]["note"] == ""


def test_groups_list_shows_the_protocol_type(bootstrap):
    """classic (JoinGroup) and consumer (KIP-848) groups, as kafka-consumer-groups --list
    --type shows them, and --type filters."""
    topic = topic_with_records(bootstrap, "types")
    members = {}
    for protocol in ("classic", "consumer"):
        group = unique_name(protocol)
        member = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
        )
        member.subscribe([topic])
        members[group] = (protocol, member)
    try:
        for _ in range(100):
            for _, member in members.values():
                member.poll(0.05)
            if all(m.assignment() for _, m in members.values()):
                break
        listed = invoke("groups", "list", "--bootstrap", bootstrap, "--json")
        assert listed.exit_code == 0, listed.stderr
        types = {row["group"]: row["type"] for row in json.loads(listed.stdout)}
        for group, (protocol, _) in members.items():
            assert types[group] == protocol
        only = invoke("groups", "list", "--type", "consumer", "--bootstrap", bootstrap, "--json")
        names = {row["group"] for row in json.loads(only.stdout)}
        assert {g for g, (p, _) in members.items() if p == "consumer"} <= names
        assert not {g for g, (p, _) in members.items() if p == "classic"} & names
    finally:
        for _, member in members.values():
            member.close()


def test_groups_list_hides_onceflows_internal_groups_and_has_one_type_column(bootstrap, tmp_path):
    """topics migrate leaves the onceflow-topics-lock group behind: listed only with
    --internal. One type column: classic, consumer (KIP-848) or simple (offsets only)."""
    topic = unique_name("lock")
    spec = tmp_path / "topics.yaml"
    spec.write_text(f"topics:\n  {topic}:\n    partitions: 1\n    replication_factor: 1\n")
    migrated = onceflow("topics", "migrate", "--file", str(spec), "--bootstrap", bootstrap)
    assert migrated.returncode == 0, migrated.stderr
    simple = unique_name("simple")
    commit(bootstrap, simple, topic, 0)

    def listed(*options: str) -> dict[str, dict]:
        result = onceflow("groups", "list", "--bootstrap", bootstrap, "--json", *options)
        assert result.returncode == 0, result.stderr
        return {row["group"]: row for row in json.loads(result.stdout)}

    assert "onceflow-topics-lock" not in listed()
    assert listed()[simple] == {
        "group": simple,
        "type": "simple",
        "state": "Empty",
        "members": 0,
        "assignor": "",
        "internal": False,
    }
    internal = listed("--internal")["onceflow-topics-lock"]
    assert (internal["type"], internal["internal"]) == ("classic", True)
    assert simple in listed("--type", "classic")  # Kafka lists simple groups as Classic
    assert simple not in listed("--type", "consumer")
    table = onceflow("groups", "list", "--bootstrap", bootstrap)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[1].split()
    assert [word for word in header if word.isalpha()] == [
        "group", "type", "state", "members", "assignor"
    ], table.stdout  # fmt: skip
    assert "onceflow-topics-lock" not in table.stdout
    assert (
        "onceflow-topics-lock" in onceflow("groups", "list", "--internal", "-b", bootstrap).stdout
    )


# ------------------------------------------------------------------------ verify


def test_verify_of_an_unknown_input_topic_is_exit_1(bootstrap):
    output = topic_with_records(bootstrap, "out")
    result = invoke(
        "verify", "--input", "nosuch-input", "--output-topic", output, "--id-field", "id",
        "--bootstrap", bootstrap, "--timeout", "10",
    )  # fmt: skip
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr == "error: topic 'nosuch-input' does not exist\n"


def test_verify_with_a_mistyped_id_field_is_one_error(bootstrap):
    source = topic_with_records(bootstrap, "in", records=41)
    output = topic_with_records(bootstrap, "out", records=41)
    result = invoke(
        "verify", "--input", source, "--output-topic", output, "--id-field", "idd",
        "--bootstrap", bootstrap, "--timeout", "10",
    )  # fmt: skip
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr == (
        f"error: topic '{source}': field 'value:idd' not found in any of its 41 records: "
        "is --id-field (or --key-field) spelled right?\n"
    )


# ------------------------------------------------------------------ transactions


def test_transactions_describe_of_an_unknown_id_prints_only_the_error(bootstrap):
    for extra in ((), ("--json",)):
        result = invoke("transactions", "describe", "nosuch-tx", "--bootstrap", bootstrap, *extra)
        assert result.exit_code == 1
        assert result.stdout == ""
        assert result.stderr == "error: transactional id not found: nosuch-tx\n"


KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3],
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(sys.argv[2], b"open")
    assert producer.flush(10) == 0
    print("open", flush=True)
    time.sleep(600)
    """
)


def test_find_hanging_says_why_a_killed_producers_transaction_is_not_listed(bootstrap):
    """SIGKILL leaves the transaction open; its coordinator still knows it, so it is not
    hanging (Kafka's definition), and find-hanging says when the coordinator aborts it."""
    topic = topic_with_records(bootstrap, "killed")
    transactional_id = unique_name("killed")
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, bootstrap, topic, transactional_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "open\n"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    result = invoke(
        "transactions", "find-hanging", "--topic", topic, "--bootstrap", bootstrap, "--json"
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert result.stderr.startswith(f"not hanging: {topic}:0 producer ")
    assert f"transactional.id '{transactional_id}' is Ongoing at its coordinator" in result.stderr
    assert "transaction.timeout.ms 600000" in result.stderr
    assert "the coordinator aborts it once that timeout runs out, at about " in result.stderr
    assert "do not abort it by hand" in result.stderr


# ----------------------------------------------------------------- client options


def test_command_config_and_flag_win_over_the_environment(bootstrap, tmp_path):
    """$ONCEFLOW_BOOTSTRAP names a dead port; the file's bootstrap.servers must win, and
    every disagreement is reported naming the source used."""
    dead = f"127.0.0.1:{free_port()}"
    properties = tmp_path / "client.properties"
    properties.write_text(f"bootstrap.servers={bootstrap}\n")
    env = {"ONCEFLOW_BOOTSTRAP": dead}
    from_file = invoke("topics", "list", "--command-config", str(properties), env=env)
    assert from_file.exit_code == 0, from_file.stderr
    assert from_file.stderr == (
        f"warning: using bootstrap servers {bootstrap} from bootstrap.servers in "
        f"{properties}, not {dead} from $ONCEFLOW_BOOTSTRAP\n"
    )
    properties.write_text(f"bootstrap.servers={dead}\n")
    from_flag = invoke(
        "topics", "list", "--command-config", str(properties), "--bootstrap", bootstrap, env=env
    )
    assert from_flag.exit_code == 0, from_flag.stderr
    assert f"using bootstrap servers {bootstrap} from --bootstrap, not {dead} from " in (
        from_flag.stderr
    )
    agreeing = invoke("topics", "list", env={"ONCEFLOW_BOOTSTRAP": bootstrap})
    assert (agreeing.exit_code, agreeing.stderr) == (0, "")
