"""The ``onceflow`` commands as a user meets them: exit codes, one-line errors, --json,
tables through a pipe, the client options, and the operations on groups and transactions.

One broker for the module (topics and groups have unique names); the hanging-transaction
test starts its own, because it stops the broker and removes its transaction log.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from onceflow.cli import main
from onceflow.ports import free_port
from onceflow.testing import unique_name
from tests.integration.console_script import assert_one_line_error
from tests.integration.console_script import onceflow as console_script
from tests.kit.clients import produce

LONG = "x" * 60  # longer than any column a narrow terminal could give it
CLI_ENV = {**os.environ, "COLUMNS": "40", "PYTHONUNBUFFERED": "1"}


def onceflow(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The command as a process whose stdout is a pipe (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "onceflow", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=CLI_ENV,
        check=False,
    )


def invoke(*args: str):
    """The command in this process (fast); stdout and stderr apart."""
    return CliRunner().invoke(main, list(args))


def as_json(*args: str):
    result = invoke(*args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def produce_json(bootstrap: str, topic: str, count: int, partition: int | None = None) -> None:
    """``count`` JSON records {"id": n}, keyed k0, k1, k2 in turn."""
    values = [json.dumps({"id": n}) for n in range(count)]
    produce(bootstrap, topic, values, partition=partition, keys=[f"k{n % 3}" for n in range(count)])


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], **conf) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.commit(
        offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
    )
    consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
    consumer.close()
    return [tp.offset for tp in found]


@dataclass
class Scene:
    bootstrap: str
    topic: str  # 3 partitions, 10 records each, long name
    group: str  # Empty, committed 3 per partition, long name
    member_client_id: str
    live_group: str  # one member holding the topic
    transactional_id: str  # an open (live, not hanging) transaction on txn_topic
    txn_topic: str
    data_dir: Path  # the module broker's


@pytest.fixture(scope="module")
def scene(kafka_module_broker):
    bootstrap = kafka_module_broker.bootstrap
    topic = unique_name(f"orders-{LONG}")
    txn_topic = unique_name("txn")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka.admin import NewTopic

    for name, partitions in ((topic, 3), (txn_topic, 1)):
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    for partition in range(3):
        produce_json(bootstrap, topic, 10, partition)
    group = unique_name(f"group-{LONG}")
    commit(bootstrap, group, {(topic, p): 3 for p in range(3)})
    live_group = unique_name("live")
    client_id = unique_name(f"client-{LONG}")
    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": live_group, "client.id": client_id}
    )
    member.subscribe([topic])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.1)
    transactional_id = unique_name(f"txn-{LONG}")
    # Open for the whole module: a timeout (librdkafka's default is 60 s) would let the
    # coordinator abort it, and fence this producer, while the module's tests still run.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 900_000,
        }
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(txn_topic, b"pending")
    producer.flush(10)
    yield Scene(
        bootstrap,
        topic,
        group,
        client_id,
        live_group,
        transactional_id,
        txn_topic,
        kafka_module_broker.data_dir,
    )
    producer.abort_transaction(10)
    member.close()


# --------------------------------------------------------------------------- exit codes

CLUSTER_COMMANDS = [
    ["groups", "list"],
    ["groups", "describe", "g"],
    ["groups", "offsets", "g"],
    ["groups", "reset-offsets", "g", "--all-topics", "--to-earliest"],
    ["groups", "delete", "g"],
    ["topics", "list"],
    ["topics", "describe", "t"],
    ["topics", "plan", "--file", "examples/orders/topics.yaml"],
    ["transactions", "list"],
    ["transactions", "describe", "t"],
    ["transactions", "producers", "t"],
    ["transactions", "find-hanging", "--topic", "t"],
    ["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0"],
    ["verify", "--input", "a", "--output-topic", "b", "--id-field", "id"],
]


def test_every_command_against_a_stopped_broker_is_one_line_and_exit_2():
    """Reported as soon as every broker refused: "cannot reach ...: Connection refused"
    comes from librdkafka's all-brokers-down event; the request timeout would say "no
    answer from ... within 15 s" instead (no wall-clock bound: a loaded machine takes
    seconds to start the CLI)."""
    nowhere = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"  # nothing listens there

    def attempt(command: list[str]) -> tuple[list[str], subprocess.CompletedProcess]:
        return command, onceflow(*command, "--bootstrap", nowhere)

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(attempt, CLUSTER_COMMANDS))
    for command, result in outcomes:
        what = f"{' '.join(command)}: {result.stderr!r}"
        assert result.returncode == 2, what
        assert result.stdout == "", what
        assert result.stderr.startswith("error: cannot reach 127.0.0.1:"), what
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, what
        assert "Connection refused" in result.stderr and "no answer" not in result.stderr, what


def test_unknown_names_are_exit_1(scene):
    b = ("--bootstrap", scene.bootstrap)
    for command, message in [
        (["groups", "describe", "nosuch"], "error: consumer group 'nosuch' does not exist\n"),
        (["groups", "offsets", "nosuch"], "error: consumer group 'nosuch' does not exist\n"),
        (["topics", "describe", "nosuch"], "error: topic 'nosuch' does not exist\n"),
        (["transactions", "describe", "nosuch"], "error: transactional id not found: nosuch\n"),
        (["transactions", "producers", "nosuch"], "error: topic 'nosuch' does not exist\n"),
        (
            ["groups", "reset-offsets", scene.group, "--topic", "nosuch", "--to-latest"],
            "error: topic 'nosuch' does not exist\n",
        ),
    ]:
        result = invoke(*command, *b)
        assert (result.exit_code, result.stderr) == (1, message), command
    deleted = invoke("groups", "delete", "nosuch", *b)
    assert deleted.exit_code == 1 and "GROUP_ID_NOT_FOUND" in deleted.stderr


# --------------------------------------------------------------------------- output


def test_json_output_parses_back(scene):
    b = ("--bootstrap", scene.bootstrap)
    groups = {g["group"]: g for g in as_json("groups", "list", *b)}
    assert groups[scene.group] == {
        "group": scene.group,
        "type": "simple",
        "state": "Empty",
        "members": 0,
        "assignor": "",
        "internal": False,
    }
    assert groups[scene.live_group]["state"] == "Stable"
    live = as_json("groups", "describe", scene.live_group, *b)
    assert [m["client_id"] for m in live["members"]] == [scene.member_client_id]
    assert live["members"][0]["partitions"] == [[scene.topic, p] for p in range(3)]
    offsets = as_json("groups", "offsets", scene.group, *b)
    assert [(o["partition"], o["committed"], o["log_end"], o["lag"]) for o in offsets] == [
        (p, 3, 10, 7) for p in range(3)
    ]
    topics = {t["name"]: t for t in as_json("topics", "list", *b)}
    assert topics[scene.topic]["partitions"] == 3
    (described,) = as_json("topics", "describe", scene.topic, *b)
    assert [p["leader"] for p in described["partitions"]] == [0, 0, 0]
    listed = {t["transactional_id"]: t for t in as_json("transactions", "list", *b)}
    assert listed[scene.transactional_id]["state"] == "Ongoing"
    (txn,) = as_json("transactions", "describe", scene.transactional_id, *b)
    assert txn["partitions"] == [[scene.txn_topic, 0]] and txn["state"] == "Ongoing"
    (producer,) = as_json("transactions", "producers", scene.txn_topic, *b)
    assert (producer["txn_start_offset"], producer["status"]) == (0, "open")
    plan = as_json("groups", "reset-offsets", scene.group, "--all-topics", "--to-latest", *b)
    assert plan["executed"] is False
    assert [(o["current"], o["new"]) for o in plan["offsets"]] == [(3, 10)] * 3


def test_a_live_transaction_is_not_hanging(scene):
    """Its coordinator counts the partition in the transaction: it will write the marker."""
    found = as_json(
        "transactions", "find-hanging", "--topic", scene.txn_topic,
        "--max-transaction-timeout", "0", "--bootstrap", scene.bootstrap,
    )  # fmt: skip
    assert found == []


def test_tables_never_cut_values_through_a_pipe(scene):
    """COLUMNS=40 and long names: every value still appears whole in the output."""
    b = ("--bootstrap", scene.bootstrap)
    commands = {
        ("groups", "list"): [scene.group],
        ("groups", "describe", scene.live_group): [scene.member_client_id, scene.topic],
        ("groups", "offsets", scene.group): [scene.topic],
        ("groups", "reset-offsets", scene.group, "--all-topics", "--to-earliest"): [
            scene.group,
            scene.topic,
        ],
        ("topics", "list"): [scene.topic],
        ("topics", "describe", scene.topic): [scene.topic],
        ("transactions", "list"): [scene.transactional_id],
        ("transactions", "describe", scene.transactional_id): [
            scene.transactional_id,
            f"{scene.txn_topic}-0",
        ],
        ("transactions", "producers", scene.txn_topic): ["open"],
        ("transactions", "find-hanging", "--topic", scene.topic): ["producer id"],
        (
            "verify", "--input", scene.topic, "--output-topic", scene.topic,
            "--id-field", "id",
        ): [f"topic:{scene.topic}"],
    }  # fmt: skip

    def run(command: tuple[str, ...]) -> subprocess.CompletedProcess:
        return onceflow(*command, *b)

    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(commands, pool.map(run, commands), strict=True))
    for command, result in results.items():
        anomalies = command[0] == "verify"  # each partition repeats ids 0-9: duplicates
        assert result.returncode == (1 if anomalies else 0), (command, result.stderr)
        lines = result.stdout.splitlines()
        for value in commands[command]:
            assert any(value in line for line in lines), f"{command}: {value} cut:\n{result.stdout}"
        assert "…" not in result.stdout, f"{command} cut a value:\n{result.stdout}"


# --------------------------------------------------------------------------- client options


def test_command_config_file_and_x_settings_reach_the_client(scene, tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"# like Kafka's --command-config\nbootstrap.servers={scene.bootstrap}\n"
        "client.id: from-the-file\n"
    )
    listed = invoke("topics", "list", "--command-config", str(properties), "--json")
    assert listed.exit_code == 0, listed.stderr
    assert scene.topic in listed.stdout
    several = f"127.0.0.1:{free_port()},{scene.bootstrap}"  # the first host is down
    assert invoke("topics", "list", "--bootstrap", several).exit_code == 0
    wrong = invoke("topics", "list", "--bootstrap", scene.bootstrap, "-X", "no.such.setting=1")
    assert wrong.exit_code == 2 and "no.such.setting" in wrong.stderr
    bad = invoke("topics", "list", "-X", "novalue")
    assert bad.exit_code == 2 and "expected KEY=VALUE, got 'novalue'" in bad.stderr
    environment = CliRunner().invoke(
        main, ["topics", "list"], env={"ONCEFLOW_BOOTSTRAP": scene.bootstrap}
    )
    assert environment.exit_code == 0 and scene.topic in environment.stdout


# --------------------------------------------------------------------------- operations


def test_reset_offsets_of_an_empty_group(scene):
    b = ("--bootstrap", scene.bootstrap)
    group = unique_name("reset")
    commit(scene.bootstrap, group, {(scene.topic, p): 5 for p in range(3)})
    dry = invoke("groups", "reset-offsets", group, "--topic", scene.topic, "--to-earliest", *b)
    assert dry.exit_code == 0 and "dry run" in dry.stdout
    assert committed(scene.bootstrap, group, scene.topic, 3) == [5, 5, 5]
    for options, expected in [
        (["--to-earliest"], [0, 0, 0]),
        (["--to-latest"], [10, 10, 10]),
        (["--shift-by", "-4"], [6, 6, 6]),
        (["--shift-by", "100"], [10, 10, 10]),  # kept at the log end
        (["--to-offset", "2"], [2, 2, 2]),
        (["--to-datetime", "2000-01-01T00:00:00.000"], [0, 0, 0]),
        (["--by-duration", "PT0S"], [10, 10, 10]),  # nothing newer than now: the log end
    ]:
        result = invoke(
            "groups", "reset-offsets", group, "--topic", scene.topic, *options, "--execute", *b
        )
        assert result.exit_code == 0, (options, result.stderr)
        assert committed(scene.bootstrap, group, scene.topic, 3) == expected, options
    one = invoke(
        "groups", "reset-offsets", group, "--topic", f"{scene.topic}:1", "--to-offset", "4",
        "--execute", *b,
    )  # fmt: skip
    assert one.exit_code == 0, one.stderr
    assert committed(scene.bootstrap, group, scene.topic, 3) == [10, 4, 10]


def test_reset_offsets_of_a_group_with_members_is_refused(scene):
    result = invoke(
        "groups", "reset-offsets", scene.live_group, "--all-topics", "--to-earliest",
        "--execute", "--bootstrap", scene.bootstrap,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: offsets can only be reset while group '{scene.live_group}' is inactive "
        "(no members), but it is Stable\n"
    )


def test_delete_a_group(scene):
    b = ("--bootstrap", scene.bootstrap)
    group = unique_name("doomed")
    commit(scene.bootstrap, group, {(scene.topic, 0): 1})
    deleted = invoke("groups", "delete", group, *b)
    assert (deleted.exit_code, deleted.stdout) == (0, f"deleted group {group}\n")
    assert invoke("groups", "describe", group, *b).exit_code == 1
    busy = invoke("groups", "delete", scene.live_group, *b)
    assert busy.exit_code == 1 and "NON_EMPTY_GROUP" in busy.stderr


def test_abort_a_hanging_transaction_unblocks_read_committed(kafka_broker_process):
    """A transaction whose coordinator state is lost hangs; find-hanging and abort end it."""
    bootstrap = kafka_broker_process.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic("stuck", 1, 1)])["stuck"].result(10)
    produce_json(bootstrap, "stuck", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lost"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("stuck", b"in the lost transaction")
    producer.flush(10)
    produce_json(bootstrap, "stuck", 1)  # behind the open transaction: invisible to read_committed
    kafka_broker_process.kill()
    shutil.rmtree(kafka_broker_process.data_dir / "__transaction_state-0")
    kafka_broker_process.start()

    def read_committed() -> list[bytes]:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "r", "isolation.level": "read_committed"}
        )
        consumer.assign([TopicPartition("stuck", 0, 0)])
        values = [m.value() for m in consumer.consume(10, 2) if m.error() is None]
        consumer.close()
        return values

    assert len(read_committed()) == 1
    b = ("--bootstrap", bootstrap)
    assert as_json("transactions", "find-hanging", "--topic", "stuck", *b) == []  # < 15 min
    (hanging,) = as_json(
        "transactions", "find-hanging", "--topic", "stuck", "--max-transaction-timeout", "0", *b
    )
    assert (hanging["partition"], hanging["txn_start_offset"]) == (0, 1)
    abort = invoke(
        "transactions", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", "1", *b
    )
    assert abort.exit_code == 0, abort.stderr
    after_abort = read_committed()
    assert len(after_abort) == 2  # the record after the aborted transaction
    assert b"in the lost transaction" not in after_abort
    assert (
        as_json(
            "transactions", "find-hanging", "--topic", "stuck", "--max-transaction-timeout", "0", *b
        )
        == []
    )
    del producer


# --------------------------------------------------------------------------- broker


def test_a_broker_that_cannot_start_says_error_like_every_command(tmp_path, scene):
    """A taken port and a data directory another broker holds: one 'error:' line, exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        on_taken_port = console_script(
            "broker", "--data-dir", str(tmp_path / "data"), "--port", str(port), timeout=60
        )
    held = scene.data_dir  # the module's broker runs on it
    on_held_data = console_script("broker", "--data-dir", str(held), "--port", "0", timeout=60)
    for result in (on_taken_port, on_held_data):
        line = assert_one_line_error(result, 1)
        assert line.startswith("error: cannot start broker: ") and "in use" in line, line
