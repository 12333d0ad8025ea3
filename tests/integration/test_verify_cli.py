"""``onceflow verify`` against a real broker and SQLite: clean runs pass, each anomaly fails."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.cli import main
from onceflow.testing import unique_name
from onceflow.verify.sources import (
    READ_UNCOMMITTED,
    read_topic,
    topic_ranges,
    transaction_outcomes,
)

EVENTS = 40
STORES = 4


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(10)


def event(n: int, **extra: object) -> dict[str, bytes]:
    store = f"s{n % STORES}"
    return {
        "key": store.encode(),
        "value": json.dumps({"order_id": n, "store": store, **extra}).encode(),
    }


def transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(10)
    return producer


def write_input(bootstrap: str) -> None:
    """EVENTS committed events, plus an aborted transaction holding event 999."""
    producer = transactional(bootstrap, "input-writer")
    producer.begin_transaction()
    for n in range(EVENTS // 2):
        producer.produce("orders", **event(n))
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce("orders", **event(999))
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    for n in range(EVENTS // 2, EVENTS):
        producer.produce("orders", **event(n))
    producer.commit_transaction(10)


def write_table(path, ids) -> str:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders_out (order_id INTEGER, store TEXT, total REAL)")
        db.executemany(
            "INSERT INTO orders_out VALUES (?, ?, 1.0)", [(n, f"s{n % STORES}") for n in ids]
        )
    return f"sqlite:///{path}"


def verify(*args: str, bootstrap: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        [
            "verify",
            "--bootstrap",
            bootstrap,
            "--input",
            "orders",
            "--id-field",
            "order_id",
            "--key-field",
            "store",
            *args,
        ],
    )
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.fixture
def broker_with_input(kafka_broker):
    create_topics(kafka_broker.bootstrap, "orders", "out")
    write_input(kafka_broker.bootstrap)
    return kafka_broker


def test_clean_table_and_topic_pass(broker_with_input, tmp_path):
    bootstrap = broker_with_input.bootstrap
    url = write_table(tmp_path / "out.db", range(EVENTS))
    producer = transactional(bootstrap, "copier")
    producer.begin_transaction()
    for n in range(EVENTS):
        producer.produce("out", **event(n))
    producer.commit_transaction(10)
    producer.begin_transaction()  # an aborted retry: invisible to read_committed, so fine
    for n in range(5):
        producer.produce("out", **event(n))
    producer.flush(10)
    producer.abort_transaction(10)

    report_path = tmp_path / "report.json"
    code, output = verify(
        "--database-url",
        url,
        "--table",
        "orders_out",
        "--output-topic",
        "out",
        "--json",
        str(report_path),
        bootstrap=bootstrap,
    )
    assert code == 0, output
    assert "no anomalies" in output
    report = json.loads(report_path.read_text())
    assert report["ok"] is True
    assert report["input"] == {
        "records": EVENTS,
        "events": EVENTS,
        "duplicate_records": 0,
        "aborted_events": 1,
        "dead_lettered_events": 0,
    }
    assert [(s["name"], s["records"]) for s in report["sinks"]] == [
        ("table:orders_out", EVENTS),
        ("topic:out", EVENTS),
    ]


def test_table_anomalies_fail_with_a_report(broker_with_input, tmp_path):
    bootstrap = broker_with_input.bootstrap
    ids = [n for n in range(EVENTS) if n != 7]  # 7 missing
    ids.append(3)  # 3 duplicated
    one, five = ids.index(1), ids.index(5)
    ids[one], ids[five] = 5, 1  # 1 and 5 share store s1: reordered
    ids.append(999)  # from the aborted input transaction
    ids.append(4242)  # never in the input
    url = write_table(tmp_path / "out.db", ids)
    report_path = tmp_path / "report.json"
    code, output = verify(
        "--database-url",
        url,
        "--table",
        "orders_out",
        "--json",
        str(report_path),
        bootstrap=bootstrap,
    )
    assert code == 1
    assert "FAIL" in output
    report = json.loads(report_path.read_text())
    assert report["ok"] is False
    found = sorted((a["kind"], a["id"]) for a in report["anomalies"])
    assert found == [
        ("aborted_visible", "999"),
        ("duplicated", "3"),
        ("missing", "7"),
        ("reordered", "1"),
        ("unexpected", "4242"),
    ]
    # A query with its own order works too, and reading ORDER BY order_id hides the reorder.
    code, _ = verify(
        "--database-url",
        url,
        "--query",
        "SELECT DISTINCT order_id, store FROM orders_out WHERE order_id < 1000 ORDER BY order_id",
        "--json",
        str(report_path),
        bootstrap=bootstrap,
    )
    assert code == 1
    report = json.loads(report_path.read_text())
    assert sorted((a["kind"], a["id"]) for a in report["anomalies"]) == [
        ("aborted_visible", "999"),
        ("missing", "7"),
    ]


def test_output_topic_duplicates_and_marked_aborts_fail(broker_with_input, tmp_path):
    bootstrap = broker_with_input.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap})  # at-least-once copier
    for n in range(EVENTS):
        producer.produce("out", **event(n))
    producer.produce("out", **event(11))  # a redelivered event
    producer.produce("out", **event(12, aborted=True))  # the writer marked it as aborted
    assert producer.flush(10) == 0
    code, output = verify(
        "--output-topic",
        "out",
        "--abort-marker",
        "aborted",
        "--json",
        "-",
        bootstrap=bootstrap,
    )
    assert code == 1, output
    report = json.loads(output)
    assert sorted((a["kind"], a["id"]) for a in report["anomalies"]) == [
        ("aborted_visible", "12"),
        ("duplicated", "11"),
    ]


def test_transaction_outcomes_come_from_the_log_markers(broker_with_input):
    bootstrap = broker_with_input.bootstrap
    ranges = topic_ranges(bootstrap, "orders")
    outcomes = transaction_outcomes(bootstrap, "orders", ranges)
    everything = read_topic(bootstrap, "orders", ranges, READ_UNCOMMITTED)
    aborted = [r for r in everything if outcomes[r.partition].is_aborted(r.offset)]
    assert [json.loads(r.value)["order_id"] for r in aborted] == [999]
    assert len(everything) == EVENTS + 1
    assert all(not o.open for o in outcomes.values())


def test_an_unknown_output_topic_exits_1_and_the_command_runs_as_a_process(broker_with_input):
    bootstrap = broker_with_input.bootstrap
    code, _ = verify("--output-topic", "no-such-topic", bootstrap=bootstrap)
    assert code == 1  # an unknown name, as in every command
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "onceflow",
            "verify",
            "--bootstrap",
            bootstrap,
            "--input",
            "orders",
            "--output-topic",
            "orders",
            "--id-field",
            "order_id",
            "--key-field",
            "store",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    assert "no anomalies" in process.stdout


def test_two_inputs_and_a_dead_letter_topic(kafka_module_broker, kafka_topic_factory, tmp_path):
    """A pipeline reading two topics (subscribePattern) that dead-letters some events."""
    bootstrap = kafka_module_broker.bootstrap
    prefix = unique_name("multi")
    first = kafka_topic_factory(partitions=2, broker=kafka_module_broker, name=f"{prefix}-in-a")
    second = kafka_topic_factory(partitions=2, broker=kafka_module_broker, name=f"{prefix}-in-b")
    dlq = kafka_topic_factory(broker=kafka_module_broker, name=f"{prefix}-dlq")
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(EVENTS):
        producer.produce(first if n % 2 else second, **event(n))
    for n in (5, 6):  # dead-lettered: the input record as it was
        producer.produce(dlq, **event(n))
    assert producer.flush(10) == 0
    url = write_table(tmp_path / "out.db", [n for n in range(EVENTS) if n not in (5, 6)])

    def run(*inputs: str, dead_letters: bool) -> tuple[int, dict]:
        args = [a for topic in inputs for a in ("--input", topic)]
        if dead_letters:
            args += ["--dlq", dlq]
        result = CliRunner().invoke(
            main,
            [
                "verify", "--bootstrap", bootstrap, *args, "--id-field", "order_id",
                "--key-field", "store", "--database-url", url, "--table", "orders_out", "--json",
            ],
        )  # fmt: skip
        return result.exit_code, json.loads(result.stdout)

    code, report = run(first, second, dead_letters=True)
    assert code == 0, report["anomalies"]
    assert report["input"]["events"] == EVENTS
    assert report["input"]["dead_lettered_events"] == 2
    assert report["sinks"][0]["dead_lettered"] == 2
    assert report["context"]["input_topic"] == [first, second]
    code, report = run(f"^{prefix}-in-[ab]$", dead_letters=True)  # a pattern, as subscribe()
    assert (code, report["input"]["events"]) == (0, EVENTS)
    code, report = run(first, second, dead_letters=False)
    assert code == 1
    missing = [a for a in report["anomalies"] if a["kind"] == "missing"]
    assert sorted((a["id"], a["detail"]["input_topic"]) for a in missing) == [
        ("5", first),
        ("6", second),
    ]
    code, report = run(first, dead_letters=True)  # one input: the other's outputs unexpected
    assert code == 1 and report["counts"]["unexpected"] == EVENTS // 2 - 1
