"""The operations commands on both engines: ``onceflow topics``, ``groups`` and
``transactions`` against onceflow's broker and the 3-node Apache Kafka cluster.

Each test runs once per engine (tests/integration/engines.py) and checks the same exit
codes and messages on both, so a difference between the engines fails one of the two
runs. On the cluster the topics are declared with replication factor 3 and
``min.insync.replicas=2`` (the seeds' durability settings); onceflow's one broker takes
replication factor 1. Every topic, group and transactional id is unique to the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigSource,
    ResourceType,
)

from onceflow.cli import main
from tests.kit.clients import create_topic, describe_configs, produce
from tests.kit.engines import ONCEFLOW, Engine, on_apache_kafka
from tests.kit.hanging import (
    KILLED_PRODUCER,
    first_line,
    hanging_producer,
    leave_hanging,
    spawned,
)

ROOT = Path(__file__).resolve().parents[2]
ENGINES = pytest.mark.parametrize("engine", [ONCEFLOW, on_apache_kafka()], indirect=True)
INVALID_TXN_STATE = 48


def onceflow(*args: str) -> tuple[int, str, str]:
    """A command in this process: (exit code, stdout, stderr)."""
    shell = {name: None for name in os.environ if name.startswith("ONCEFLOW_")}
    result = CliRunner().invoke(main, list(args), env=shell)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def admin(engine: Engine) -> AdminClient:
    return AdminClient({"bootstrap.servers": engine.bootstrap})


def read_committed(engine: Engine, topic: str, partition: int, seconds: float) -> list[bytes]:
    """What a read_committed consumer gets from the partition within ``seconds``."""
    consumer = Consumer(
        {
            "bootstrap.servers": engine.bootstrap,
            "group.id": f"{engine.group}-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(10, 0.2) if m.error() is None]
    consumer.close()
    return values


# --------------------------------------------------------------------------- topics


def write_topics_file(path: Path, engine: Engine, partitions: int, retention_ms: int) -> Path:
    """Two topics; the ``production`` environment asks for replication factor 3 and
    ``min.insync.replicas=2``, the file's defaults for 1 and 1."""
    path.write_text(
        textwrap.dedent(
            f"""
            defaults:
              replication_factor: 1
              config: {{min.insync.replicas: 1}}
            topics:
              {engine.input}:
                partitions: {partitions}
                keyed_by: store
                config: {{retention.ms: {retention_ms}, cleanup.policy: delete}}
              {engine.output}:
                partitions: 1
            environments:
              production:
                defaults:
                  replication_factor: 3
                  config: {{min.insync.replicas: 2}}
            """
        )
    )
    return path


def topics(command: str, spec: Path, engine: Engine, *options: str) -> tuple[int, str, str]:
    env = () if engine.cluster is None else ("--env", "production")
    return onceflow(
        "topics", command, "--file", str(spec), "--bootstrap", engine.bootstrap,
        "--detailed-exitcode", *env, *options,
    )  # fmt: skip


def described(engine: Engine, topic: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, the topic's own configs) as the cluster says."""
    client = admin(engine)
    partitions = client.list_topics(topic, timeout=10).topics[topic].partitions
    own = {
        name: entry.value
        for name, entry in describe_configs(client, ResourceType.TOPIC, topic).items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    return len(partitions), len(partitions[0].replicas), own


@ENGINES
def test_topics_plan_migrate_replan_change_and_refusals(engine, tmp_path):
    rf = str(engine.replication_factor)
    isr = "2" if engine.cluster is not None else "1"
    spec = write_topics_file(tmp_path / "topics.yaml", engine, 3, 604_800_000)

    code, out, err = topics("plan", spec, engine)
    assert code == 2, out + err  # changes planned
    assert f"+ {engine.input}  create: partitions=3 replication_factor={rf}" in out
    assert f"+ min.insync.replicas = {isr}" in out
    assert out.endswith("Plan: 2 to create.\n")
    assert engine.input not in admin(engine).list_topics(timeout=10).topics  # plan changed nothing

    code, out, err = topics("migrate", spec, engine)
    assert code == 2, out + err  # changes made
    assert out.endswith("Applied: 2 to create.\n")
    # a lone run takes the lock without waiting for anybody (on the cluster it used to
    # announce "held by another runner" while it was still joining the lock's group)
    assert err == ""
    if engine.cluster is not None:
        for topic in (engine.input, engine.output):
            engine.cluster.wait_for_topic(topic)
    assert described(engine, engine.input) == (
        3,
        engine.replication_factor,
        {"min.insync.replicas": isr, "retention.ms": "604800000", "cleanup.policy": "delete"},
    )
    assert described(engine, engine.output) == (
        1,
        engine.replication_factor,
        {"min.insync.replicas": isr},
    )

    for command in ("plan", "migrate"):  # nothing left to do
        code, out, err = topics(command, spec, engine)
        assert (code, err) == (0, ""), out + err
        assert out.endswith("No changes: the cluster matches the spec.\n")

    produce(engine.bootstrap, engine.input, partition=0, values=[b"keyed"])
    changed = write_topics_file(tmp_path / "changed.yaml", engine, 5, 86_400_000)
    code, out, err = topics("migrate", changed, engine)
    assert code == 2, out + err
    assert f"~ {engine.input}  partitions: 3 → 5" in out
    assert "~ retention.ms: 604800000 → 86400000" in out
    assert "! warning: " in out and "adding partitions changes hash(key)" in out
    assert out.endswith("Applied: 1 to repartition, 1 to reconfigure.\n")
    if engine.cluster is not None:
        engine.cluster.wait_for_topic(engine.input)
    assert described(engine, engine.input)[0] == 5
    assert described(engine, engine.input)[2]["retention.ms"] == "86400000"
    assert topics("plan", changed, engine)[0] == 0

    # What cannot be done: the replication factor through the topic APIs, fewer partitions.
    shrink = write_topics_file(tmp_path / "shrink.yaml", engine, 2, 86_400_000)
    code, out, err = topics("migrate", shrink, engine)
    assert code == 1
    assert f"x error: {engine.input}: cannot shrink from 5 to 2 partitions" in out
    assert err == "refused: the plan has errors; nothing was changed\n"
    other_rf = spec.read_text().replace("replication_factor: 3", "replication_factor: 2")
    other_rf = other_rf.replace("replication_factor: 1", "replication_factor: 2")
    (tmp_path / "rf.yaml").write_text(other_rf)
    code, out, err = topics("plan", tmp_path / "rf.yaml", engine)
    assert code == 1
    assert f"x error: {engine.input}: replication factor is {rf}, spec says 2" in out


@ENGINES
def test_topics_refuse_a_replication_factor_above_the_brokers_before_any_change(engine, tmp_path):
    """One replica more than there are brokers: the plan says so and nothing changes;
    ``reset`` used to delete the topic first and only then have its creation refused."""
    too_many = engine.replication_factor + 1
    create_topic(engine.bootstrap, engine.input, 1)
    produce(engine.bootstrap, engine.input, partition=0, values=[b"kept"])
    spec = tmp_path / "topics.yaml"
    spec.write_text(
        "topics:\n"
        f"  {engine.input}: {{partitions: 1, replication_factor: {too_many}}}\n"
        f"  {engine.output}: {{partitions: 1, replication_factor: {too_many}}}\n"
    )
    brokers = len(admin(engine).list_topics(timeout=10).brokers)
    for command in ("migrate", "reset"):
        code, out, err = onceflow(
            "topics", command, "--yes", "--file", str(spec), "--bootstrap", engine.bootstrap
        )
        assert (code, err) == (1, "refused: the plan has errors; nothing was changed\n"), out
        # migrate: the existing topic's replication cannot change; reset: it cannot be made
        for topic in (engine.input, engine.output) if command == "reset" else (engine.output,):
            assert (
                f"x error: {topic}: replication factor {too_many} needs {too_many} brokers, "
                f"the cluster has {brokers}; Kafka refuses to create it "
                "(INVALID_REPLICATION_FACTOR)."
            ) in out
    assert engine.output not in admin(engine).list_topics(timeout=10).topics
    assert read_committed(engine, engine.input, 0, 2) == [b"kept"]


# --------------------------------------------------------------------------- groups


def consume_and_commit(engine: Engine, topic: str, count: int) -> Consumer:
    """A member of the engine's group that consumed ``count`` records and committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": engine.bootstrap,
            "group.id": engine.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < count:
        assert time.monotonic() < deadline, f"consumed {seen} of {count}"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    return consumer


def group_offsets(engine: Engine) -> dict[tuple[str, int], tuple[int, int]]:
    code, out, err = onceflow(
        "groups", "offsets", engine.group, "--bootstrap", engine.bootstrap, "--json"
    )
    assert code == 0, err
    return {(r["topic"], r["partition"]): (r["committed"], r["lag"]) for r in json.loads(out)}


@ENGINES
def test_groups_describe_reset_delete_and_refusals_while_active(engine):
    topic, group, b = engine.input, engine.group, ("--bootstrap", engine.bootstrap)
    create_topic(engine.bootstrap, topic, 2)
    for partition in range(2):
        produce(
            engine.bootstrap,
            topic,
            partition=partition,
            values=[f"{partition}-{n}".encode() for n in range(10)],
        )
    member = consume_and_commit(engine, topic, 20)
    try:
        code, out, err = onceflow("groups", "describe", group, *b, "--json")
        assert code == 0, err
        description = json.loads(out)
        assert description["state"] == "Stable"
        (only,) = description["members"]
        assert sorted(map(tuple, only["partitions"])) == [(topic, 0), (topic, 1)]
        code, out, err = onceflow("groups", "list", *b, "--json")
        listed = {row["group"]: row for row in json.loads(out)}
        assert (listed[group]["type"], listed[group]["state"]) == ("classic", "Stable")
        assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}

        # An active group: both refused with exit 1, nothing changed.
        code, out, err = onceflow(
            "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", *b
        )
        assert (code, out) == (1, "")
        assert err == (
            f"error: offsets can only be reset while group '{group}' is inactive "
            "(no members), but it is Stable\n"
        )
        code, out, err = onceflow("groups", "delete", group, *b)
        assert (code, out) == (1, "")
        assert (
            err
            == f"error: delete group {group}: Broker: The group is not empty (NON_EMPTY_GROUP)\n"
        )
        assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}
    finally:
        member.close()

    code, out, err = onceflow("groups", "describe", group, *b, "--json")
    assert (code, json.loads(out)["state"], json.loads(out)["members"]) == (0, "Empty", [])
    code, out, err = onceflow("groups", "reset-offsets", group, "--all-topics", "--to-earliest", *b)
    assert code == 0, err
    assert out.rstrip().endswith(
        "dry run: nothing committed (add --execute to commit these offsets)"
    )
    assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}
    code, out, err = onceflow(
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:1",
        "--shift-by",
        "-4",
        "--execute",
        *b,
    )
    assert code == 0, err
    assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (6, 4)}
    code, out, err = onceflow(
        "groups", "reset-offsets", group, "--all-topics", "--to-offset", "99", "--execute", *b
    )
    assert code == 0, err
    assert "2 partition(s) clamped" in out  # past the log end: the log end
    assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}
    code, out, err = onceflow(
        "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", *b
    )
    assert code == 0, err
    assert group_offsets(engine) == {(topic, 0): (0, 10), (topic, 1): (0, 10)}
    # a consumer of the group starts again from the new offsets
    member = consume_and_commit(engine, topic, 20)
    member.close()
    assert group_offsets(engine) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}

    code, out, err = onceflow("groups", "delete", group, *b)
    assert (code, out, err) == (0, f"deleted group {group}\n", "")
    for command in (("describe",), ("offsets",)):
        code, out, err = onceflow("groups", *command, group, *b)
        assert (code, out, err) == (1, "", f"error: consumer group '{group}' does not exist\n")
    code, out, err = onceflow("groups", "delete", group, *b)
    assert (code, out) == (1, "")
    assert err == (
        f"error: delete group {group}: Broker: The group id does not exist (GROUP_ID_NOT_FOUND)\n"
    )


# --------------------------------------------------------------------------- transactions


def kafka_transactions(engine: Engine, *args: str) -> list[list[str]]:
    """Kafka's own kafka-transactions tool (TransactionsCommand, from the pinned release's
    jars): the rows of the table it prints, header first."""
    from tests.integration.java_tools import JVM_OPTIONS, kafka_classpath

    command = [
        "java",
        *JVM_OPTIONS,
        "-cp",
        kafka_classpath(),
        "org.apache.kafka.tools.TransactionsCommand",
    ]
    result = subprocess.run(
        [*command, "--bootstrap-server", engine.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def cells(rows: list[list[str]]) -> list[dict[str, str]]:
    header, *body = rows
    return [{h.strip(): v.strip() for h, v in zip(header, row, strict=False)} for row in body]


@ENGINES
def test_transactions_find_and_abort_a_really_hanging_transaction(engine):
    """Partition 0: a transactional write the coordinator never heard of (no
    AddPartitionsToTxn), its producer SIGKILLed: the last stable offset is stuck for good.
    Partition 1: a librdkafka transactional producer SIGKILLed in its transaction, which
    its coordinator still knows (not hanging). find-hanging must list the first only;
    abort must free read_committed readers of partition 0."""
    topic, b = engine.input, ("--bootstrap", engine.bootstrap)
    hanging_id, killed_id = f"{engine.txn_id}-hanging", f"{engine.txn_id}-killed"
    create_topic(engine.bootstrap, topic, 2)
    produce(engine.bootstrap, topic, partition=0, values=[b"before"])
    # Both engines verify transactional writes (KIP-890) by default: refused.
    refusing = hanging_producer(engine.bootstrap, topic, 0, f"{hanging_id}-refused")
    with spawned(*refusing) as refused:
        assert first_line(refused) == f"open {INVALID_TXN_STATE} -1"
    assert leave_hanging(engine.bootstrap, topic, 0, hanging_id) == 1  # open from offset 1
    with spawned(sys.executable, "-c", KILLED_PRODUCER, engine.bootstrap, topic, killed_id) as live:
        assert first_line(live) == "open"
    produce(engine.bootstrap, topic, partition=0, values=[b"after"])
    assert read_committed(engine, topic, 0, 3) == [b"before"]  # stuck at the open transaction

    code, out, err = onceflow("transactions", "list", *b, "--json")
    assert code == 0, err
    states = {t["transactional_id"]: t["state"] for t in json.loads(out)}
    assert (states[hanging_id], states[killed_id]) == ("Empty", "Ongoing")
    code, out, err = onceflow("transactions", "describe", hanging_id, killed_id, *b, "--json")
    assert code == 0, err
    hanging, killed = json.loads(out)
    assert (hanging["state"], hanging["start_time_ms"], hanging["partitions"]) == (
        "Empty",
        None,
        [],
    )
    assert killed["state"] == "Ongoing" and killed["partitions"] == [[topic, 1]]
    code, out, err = onceflow("transactions", "describe", f"{engine.txn_id}-nosuch", *b)
    assert (code, out) == (1, "")
    assert err == f"error: transactional id not found: {engine.txn_id}-nosuch\n"
    code, out, err = onceflow("transactions", "producers", topic, *b, "--json")
    status = {(p["partition"], p["txn_start_offset"]): p["status"] for p in json.loads(out)}
    assert status == {(0, 1): "hanging", (1, 0): "open"}

    find_hanging = ("transactions", "find-hanging", "--topic", topic, *b, "--json")
    # Younger than --max-transaction-timeout (15 min): not listed yet; named on stderr.
    code, out, err = onceflow(*find_hanging)
    assert (code, json.loads(out)) == (0, [])
    assert (
        f"not hanging: {topic}:0 producer " in err and "less than --max-transaction-timeout" in err
    )
    code, out, err = onceflow(*find_hanging, "--max-transaction-timeout", "0")
    assert code == 0, err
    ((found),) = json.loads(out)
    assert (found["topic"], found["partition"], found["txn_start_offset"]) == (topic, 0, 1)
    assert f"not hanging: {topic}:1 producer " in err
    assert f"transactional.id '{killed_id}' is Ongoing at its coordinator" in err
    # Kafka's own tool agrees, on both engines
    (kafka_found,) = cells(
        kafka_transactions(
            engine, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
        )
    )
    assert (kafka_found["Topic"], kafka_found["Partition"], kafka_found["StartOffset"]) == (
        topic,
        "0",
        "1",
    )
    assert kafka_found["ProducerId"] == str(found["producer_id"])
    (kafka_described,) = cells(
        kafka_transactions(engine, "describe", "--transactional-id", hanging_id)
    )
    assert kafka_described["TransactionState"] == "Empty"
    assert kafka_described["CurrentTransactionStartTimeMs"] == "None"  # -1 on the wire

    code, out, err = onceflow(
        "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "1", *b
    )
    assert (code, err) == (0, "")
    assert out == f"aborted the transaction of producer {found['producer_id']} on {topic}:0\n"
    assert read_committed(engine, topic, 0, 3) == [b"before", b"after"]
    code, out, err = onceflow(*find_hanging, "--max-transaction-timeout", "0")
    assert (code, json.loads(out)) == (0, [])
    code, out, err = onceflow(
        "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "1", *b
    )
    assert (code, out) == (1, "")
    assert err == f"error: no open transaction starts at offset 1 on {topic}:0\n"


@ENGINES
def test_a_killed_producers_transaction_is_not_hanging_and_its_coordinator_ends_it(engine):
    """SIGKILL in a transaction with transaction.timeout.ms=2000: find-hanging names it as
    live (not to be aborted by hand), then the coordinator aborts it on its own, and
    read_committed readers get past it, on both engines."""
    topic, b = engine.input, ("--bootstrap", engine.bootstrap)
    create_topic(engine.bootstrap, topic, 2)
    script = KILLED_PRODUCER.replace("600000", "2000")
    with spawned(sys.executable, "-c", script, engine.bootstrap, topic, engine.txn_id) as live:
        assert first_line(live) == "open"
    produce(engine.bootstrap, topic, partition=1, values=[b"after"])
    code, out, err = onceflow(
        "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0", *b,
        "--json",
    )  # fmt: skip
    assert (code, json.loads(out)) == (0, [])
    assert f"transactional.id '{engine.txn_id}' is Ongoing at its coordinator" in err
    assert "(transaction.timeout.ms 2000)" in err and "do not abort it by hand" in err

    # The coordinator looks for timed-out transactions every 10 s (Kafka's default
    # transaction.abort.timed.out.transaction.cleanup.interval.ms, on both engines).
    deadline = time.monotonic() + 40
    while (seen := read_committed(engine, topic, 1, 1)) != [b"after"]:
        assert seen == [] and time.monotonic() < deadline, seen
    # the markers are written (PrepareAbort) before the coordinator records the end
    while True:
        code, out, err = onceflow("transactions", "describe", engine.txn_id, *b, "--json")
        assert code == 0, err
        ((described),) = json.loads(out)
        if described["state"] != "PrepareAbort":
            break
        assert time.monotonic() < deadline, described
        time.sleep(0.2)
    assert described["state"] == "CompleteAbort", described
    assert described["producer_epoch"] == 1  # the coordinator fenced the killed producer
    assert described["partitions"] == []
