"""onceflow prove's expectations (tables of state compared with rows computed from the
input), a user's input generator, and the placeholders in a command line."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from onceflow.prove.database import TrialDatabase
from onceflow.prove.errors import ProveError
from onceflow.prove.expect import Expectation, expectations, read_rows
from onceflow.prove.generator import input_values
from onceflow.prove.outputs import Output, parse_outputs
from onceflow.prove.target import Target
from onceflow.verify.report import DUPLICATED, MISSING, UNEXPECTED, WRONG_VALUE

REVENUE = Output("table", "store_revenue")


def order(n: int, rng: random.Random) -> tuple[str, dict]:
    store = rng.choice(["s1", "s2", "s3"])
    return store, {"order_id": f"o-{n}", "store": store, "amount": rng.randint(1, 9)}


def totals(values: list[dict]) -> dict[str, list[dict]]:
    by_store: dict[str, dict] = {}
    for value in values:
        row = by_store.setdefault(value["store"], {"store": value["store"], "revenue": 0,
                                                   "orders": 0})  # fmt: skip
        row["revenue"] += value["amount"]
        row["orders"] += 1
    return {"table:store_revenue": sorted(by_store.values(), key=lambda r: r["store"])}


def test_a_generator_gives_the_same_input_every_time() -> None:
    first = list(input_values(50, 8, order))
    assert first == list(input_values(50, 8, order))
    assert all(key == value["store"] for key, value in first)
    assert list(input_values(3, 2)) == [
        ("k0", {"id": "k0-0", "key": "k0", "seq": 0}),
        ("k1", {"id": "k1-0", "key": "k1", "seq": 0}),
        ("k0", {"id": "k0-1", "key": "k0", "seq": 1}),
    ]


def test_a_failing_or_wrong_generator_is_one_line() -> None:
    def broken(n: int, rng: random.Random) -> tuple[str, dict]:
        raise KeyError("amount")

    with pytest.raises(ProveError, match="the input generator failed at record 0: KeyError"):
        list(input_values(5, 2, broken))
    with pytest.raises(ProveError, match="returned str for record 0"):
        list(input_values(5, 2, lambda n, rng: ("k", "not a dict")))


def test_exact_totals_have_no_anomalies_and_a_counted_twice_batch_is_a_wrong_value() -> None:
    values = [v for _, v in input_values(40, 3, order)]
    (expectation,) = expectations(totals, values, [REVENUE])
    rows = [dict(row) for row in expectation.rows]
    assert expectation.compare(rows) == []
    rows[0]["revenue"] += 7  # one order counted twice
    rows[0]["orders"] += 1
    (anomaly,) = expectation.compare(rows)
    assert anomaly.kind == WRONG_VALUE and anomaly.id == rows[0]["store"]
    assert anomaly.detail["actual"]["orders"] == anomaly.detail["expected"]["orders"] + 1


def test_missing_duplicated_and_unexpected_rows() -> None:
    expected = [{"store": "s1", "revenue": 5}, {"store": "s2", "revenue": 3}]
    expectation = Expectation(REVENUE, expected)
    actual = [{"store": "s2", "revenue": 3}, {"store": "s2", "revenue": 3},
              {"store": "s9", "revenue": 1}]  # fmt: skip
    kinds = sorted((a.kind, a.id) for a in expectation.compare(actual))
    assert kinds == [(DUPLICATED, "s2"), (MISSING, "s1"), (UNEXPECTED, "s9")]


def test_an_expect_function_must_name_declared_tables() -> None:
    outputs = parse_outputs(["table:store_revenue", "topic:confirmations"])
    with pytest.raises(ProveError, match="names 'table:other'"):
        expectations(lambda v: {"table:other": [{"a": 1}]}, [], outputs)
    with pytest.raises(ProveError, match="names 'topic:confirmations'"):
        expectations(lambda v: {"topic:confirmations": [{"a": 1}]}, [], outputs)
    with pytest.raises(ProveError, match="non-empty list of dicts"):
        expectations(lambda v: {"table:store_revenue": []}, [], outputs)
    with pytest.raises(ProveError, match="the expect function failed: ZeroDivisionError"):
        expectations(lambda v: 1 / 0, [], outputs)


def test_rows_are_read_by_the_expected_columns(tmp_path: Path) -> None:
    path = tmp_path / "out.db"
    database = TrialDatabase(f"sqlite:///{path}")
    expectation = Expectation(REVENUE, [{"store": "s1", "revenue": 5}])
    assert read_rows(database, expectation) is None  # no database yet
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE store_revenue (store TEXT, orders INT, revenue INT)")
        db.execute("INSERT INTO store_revenue VALUES ('s1', 2, 5)")
    assert read_rows(database, expectation) == [{"store": "s1", "revenue": 5}]
    wrong = Expectation(REVENUE, [{"store": "s1", "total": 5}])
    with pytest.raises(
        ProveError, match="has no column 'total' \\(it has store, orders, revenue\\)"
    ):
        read_rows(database, wrong)


def test_placeholders_in_the_command_line_get_the_trial_values() -> None:
    target = Target(
        mode="spark", argv=["python", "job.py", "--bootstrap", "{bootstrap}",
                            "--checkpoint-dir={checkpoint}/q", "--url", "{database_url}"],
        directory=Path("."), steps=[], input_topic="orders", other_inputs=[], outputs=[],
        mapping=None, uses_database=True, schema=None, topics_file=None,
        dead_letter_topic=None, replay_prefix=[],
    )  # fmt: skip
    values = {"bootstrap": "127.0.0.1:9", "input_topic": "orders",
              "database_url": "sqlite:////t/p.db", "checkpoint": "/t/c", "trial_dir": "/t",
              "worker": "1"}  # fmt: skip
    assert target.command_line(values) == [
        "python", "job.py", "--bootstrap", "127.0.0.1:9", "--checkpoint-dir=/t/c/q",
        "--url", "sqlite:////t/p.db",
    ]  # fmt: skip
