"""``onceflow verify`` against a real broker and SQLite: clean runs pass, each anomaly fails."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from onceflow.cli import main
from onceflow.db import connect
from onceflow.ports import free_port
from onceflow.testing import unique_name
from onceflow.verify.sources import (
    READ_UNCOMMITTED,
    read_topic,
    topic_ranges,
    transaction_outcomes,
)
from tests.integration.console_script import assert_one_line_error, onceflow
from tests.kit.clients import create_topic
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

EVENTS = 40
STORES = 4


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


def verify_with_report(tmp_path: Path, *args: str, bootstrap: str) -> tuple[int, str, Any]:
    """``verify`` with a JSON report file: the exit code, the output and the report (None
    when none was written)."""
    path = tmp_path / "report.json"
    code, output = verify(*args, "--json", str(path), bootstrap=bootstrap)
    return code, output, json.loads(path.read_text()) if path.exists() else None


def table_options(url: str) -> tuple[str, ...]:
    """The options naming the output table, orders_out of the database at ``url``."""
    return ("--database-url", url, "--table", "orders_out")


@pytest.fixture
def broker_with_input(kafka_broker):
    for name in ("orders", "out"):
        create_topic(kafka_broker.bootstrap, name, 3)
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

    code, output, report = verify_with_report(
        tmp_path, *table_options(url), "--output-topic", "out", bootstrap=bootstrap
    )
    assert code == 0, output
    assert "no anomalies" in output
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
    code, output, report = verify_with_report(tmp_path, *table_options(url), bootstrap=bootstrap)
    assert code == 1
    assert "FAIL" in output
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
    code, _, report = verify_with_report(
        tmp_path,
        "--database-url",
        url,
        "--query",
        "SELECT DISTINCT order_id, store FROM orders_out WHERE order_id < 1000 ORDER BY order_id",
        bootstrap=bootstrap,
    )
    assert code == 1
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


# ------------------------------------------------- the installed script, one broker


@pytest.fixture(scope="module")
def orders(kafka_module_broker) -> tuple[str, str]:
    """(bootstrap, topic): EVENTS events keyed by store, in 3 partitions."""
    bootstrap = kafka_module_broker.bootstrap
    topic = unique_name("orders")
    create_topic(bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(EVENTS):
        producer.produce(topic, **event(n))
    assert producer.flush(10) == 0
    return bootstrap, topic


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'out.db'}"
    return request.getfixturevalue("postgres_url")


def fill_table(url: str, ids: Iterable[int]) -> None:
    """orders_out(order_id, store): one row per id, in the order given."""
    with connect(url) as db:
        db.script(["CREATE TABLE orders_out (order_id INTEGER, store TEXT)"])
        rows = [(n, f"s{n % STORES}") for n in ids]
        with db.transaction() as tx:
            tx.executemany("INSERT INTO orders_out VALUES (?, ?)", rows)


def run_verify_script(orders: tuple[str, str], *args: str) -> subprocess.CompletedProcess:
    bootstrap, topic = orders
    return onceflow(
        "verify", "--bootstrap", bootstrap, "--input", topic, "--id-field", "order_id",
        "--key-field", "store", "--timeout", "20", *args,
    )  # fmt: skip


def test_a_database_that_cannot_be_opened_is_one_line_and_exit_2(orders, tmp_path):
    missing_file = tmp_path / "no-such-dir" / "nonexist.db"
    no_server = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    for url, message in [
        (f"sqlite:///{missing_file}", f"cannot open SQLite database {missing_file}: no such file"),
        (no_server, "cannot connect to PostgreSQL: connection failed: "),
    ]:
        result = run_verify_script(orders, "--database-url", url, "--table", "orders_out")
        assert assert_one_line_error(result, 2).startswith(f"error: {message}"), url
    assert "Connection refused" in result.stderr


def test_a_table_that_is_not_there_is_one_line_and_exit_2(orders, database_url):
    fill_table(database_url, range(EVENTS))
    result = run_verify_script(orders, "--database-url", database_url, "--table", "nosuch")
    assert assert_one_line_error(result, 2).startswith("error: cannot read table 'nosuch': ")


def test_a_mistyped_column_fails_on_every_database(orders, database_url):
    """SQLite reads ORDER BY "nosuch" as a string and sorts by nothing: still an error."""
    fill_table(database_url, range(EVENTS))
    table = table_options(database_url)
    columns = "(its columns: order_id, store)"
    for options, message in [
        (
            ["--order-by", "nosuch"],
            f"table 'orders_out' has no column 'nosuch' {columns}: is --order-by spelled right?",
        ),
        (
            ["--output-id-field", "idd"],
            f"table 'orders_out' has no column 'idd' {columns}: "
            "is --id-field (or --output-id-field) spelled right?",
        ),
        (
            ["--output-key-field", "shop"],
            f"table 'orders_out' has no column 'shop' {columns}: "
            "is --key-field (or --output-key-field) spelled right?",
        ),
    ]:
        result = run_verify_script(orders, *table, *options)
        assert assert_one_line_error(result, 2) == f"error: {message}", options
    query = "SELECT order_id FROM orders_out ORDER BY order_id"
    result = run_verify_script(orders, "--database-url", database_url, "--query", query)
    assert assert_one_line_error(result, 2) == (
        "error: the query's result has no column 'store' (its columns: order_id): "
        "is --key-field (or --output-key-field) spelled right?"
    )
    spelled_right = run_verify_script(orders, *table, "--order-by", "order_id")
    assert spelled_right.returncode == 0, spelled_right.stdout + spelled_right.stderr
    assert "no anomalies" in spelled_right.stdout


def test_input_records_that_repeat_an_id_are_said_plainly(kafka_module_broker, tmp_path):
    """A producer retry without idempotence repeats ids in the input: the report says how
    many input records repeat an id, and marks each duplicated output event that is
    repeated in the input."""
    bootstrap = kafka_module_broker.bootstrap
    topic = unique_name("repeats")
    create_topic(bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in [*range(EVENTS), *range(10)]:  # ids 0-9 twice
        producer.produce(topic, **event(n))
    assert producer.flush(10) == 0
    url = f"sqlite:///{tmp_path / 'out.db'}"
    fill_table(url, [*range(EVENTS), *range(10)])  # the pipeline wrote every record
    table = table_options(url)
    result = run_verify_script((bootstrap, topic), *table)
    assert result.returncode == 1, result.stdout + result.stderr
    said = " ".join(result.stdout.split())  # as the console wrapped it
    assert (
        f"10 input records repeat an id ({EVENTS + 10} records, {EVENTS} distinct ids): "
        "verify expects each id once in every output" in said
    ), result.stdout
    assert "table:orders_out: 10 of its 10 duplicated events repeat an id in the input" in said
    report = json.loads(run_verify_script((bootstrap, topic), *table, "--json").stdout)
    assert report["input"]["duplicate_records"] == 10
    duplicated = [a for a in report["anomalies"] if a["kind"] == "duplicated"]
    assert sorted(int(a["id"]) for a in duplicated) == list(range(10))
    assert {a["detail"]["input_copies"] for a in duplicated} == {2}
