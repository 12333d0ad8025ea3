"""Pattern building blocks without a broker: guarantees, crash points, SQLite stores."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import replace

import pytest

from onceflow.configuration_error import ConfigurationError
from onceflow.crash_points import CrashPoints
from onceflow.db import LockTimeout, connect
from onceflow.patterns.guarantees import (
    CommitTiming,
    Pattern,
    ProcessingGuarantee,
    UnsafeCombinationWarning,
    plan,
)
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore, StartOffset
from onceflow.patterns.outbox import Outbox, shard_of
from onceflow.patterns.records import DecodeError, json_decoder
from onceflow.patterns.runner_config import RunnerConfig


def test_guarantees_map_to_commit_timing():
    assert plan("at_most_once").commit is CommitTiming.BEFORE
    assert plan("at_least_once").commit is CommitTiming.AFTER
    assert plan("exactly_once", has_database=True).pattern is Pattern.DB_OFFSETS
    assert plan("exactly_once_v2").pattern is Pattern.KAFKA_TRANSACTIONS
    inbox = plan("at_least_once", inbox=True, has_database=True)
    assert (inbox.guarantee, inbox.pattern) == (ProcessingGuarantee.EXACTLY_ONCE, Pattern.INBOX)
    assert plan("exactly_once", "db_offsets", has_database=True).commit is CommitTiming.DATABASE


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("exactly_twice",), {}, "unknown processing_guarantee"),
        (("exactly_once", "magic"), {}, "unknown pattern"),
        (("at_least_once", "db_offsets"), {}, "only applies to exactly_once"),
        (("exactly_once", "db_offsets"), {}, "needs a database_url"),
        (("at_most_once",), {"inbox": True}, "needs at_least_once"),
        (("exactly_once", "kafka_transactions"), {"inbox": True, "has_database": True},
         "LOSE events"),
    ],
)  # fmt: skip
def test_bad_configurations_are_refused(args, kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        plan(*args, **kwargs)


def test_unsafe_combination_override_warns():
    with pytest.warns(UnsafeCombinationWarning, match="UNSAFE"):
        chosen = plan(
            "exactly_once",
            "kafka_transactions",
            inbox=True,
            has_database=True,
            allow_unsafe_inbox_with_kafka_transactions=True,
        )
    assert chosen.inbox and chosen.uses_kafka_transactions


def test_crash_points_parse_and_count():
    assert CrashPoints.parse("a, b:3") == {"a": 1, "b": 3}
    with pytest.raises(ValueError, match="bad crash point"):
        CrashPoints.parse("a:x")
    seen = []
    points = CrashPoints({}, callback=lambda step, n: seen.append((step, n)))
    points.reached("x")
    points.reached("x")
    assert seen == [("x", 1), ("x", 2)]
    assert CrashPoints.from_env({"ONCEFLOW_CRASH_AT": "after_db_commit:2"}).armed == {
        "after_db_commit": 2
    }


def test_timeouts_must_stay_below_max_poll_interval(tmp_path):
    config = RunnerConfig(
        "127.0.0.1:9", "g", ["t"], database_url=f"sqlite:///{tmp_path}/a.db",
        max_poll_interval_ms=30_000,
    )  # fmt: skip
    for name in ("lock_timeout_ms", "statement_timeout_ms"):
        with pytest.raises(ConfigurationError, match=rf"{name}=30000 .*max\.poll\.interval\.ms"):
            replace(config, **{name: 30_000}).validate()
    replace(config, lock_timeout_ms=29_999, statement_timeout_ms=29_999).validate()
    replace(config, database_url=None, processing_guarantee="at_least_once",
            lock_timeout_ms=30_000).validate()  # fmt: skip
    assert not (tmp_path / "a.db").exists(), "checked before anything connects"


def test_unsupported_database_urls_are_refused():
    with pytest.raises(ConfigurationError, match="unsupported database URL"):
        connect("mysql://x")


def test_start_offset_is_max_of_database_and_kafka():
    assert StartOffset("t", 0, 10, 7).offset == 10
    assert StartOffset("t", 0, 3, 7).offset == 7
    assert StartOffset("t", 0, None, 7).offset == 7
    assert StartOffset("t", 0, None, None).offset is None
    assert not StartOffset("t", 0, 5, 5).mismatch


def test_offset_store_commits_with_the_work_and_rolls_back_with_it(tmp_path):
    db = connect(f"sqlite:///{tmp_path}/a.db")
    store = OffsetStore(db, "g")
    store.create_schema()
    store.ensure_rows([("t", 0), ("t", 1)])
    with db.transaction() as tx:
        assert store.lock(tx, "t", 0) is None
        store.store(tx, "t", 0, 42)
    with pytest.raises(RuntimeError), db.transaction() as tx:
        store.store(tx, "t", 1, 99)
        raise RuntimeError("crash in the middle of the work")
    assert store.read() == {("t", 0): 42}
    starts = store.start_offsets([("t", 0), ("t", 1)], lambda tps: {("t", 1): 5})
    assert [s.offset for s in starts] == [42, 5]


def test_sqlite_lock_blocks_a_second_owner_until_timeout(tmp_path):
    url = f"sqlite:///{tmp_path}/a.db"
    first = connect(url)
    second = connect(url, lock_timeout_ms=300)
    OffsetStore(first, "g").create_schema()
    with first.transaction():
        started = time.monotonic()
        with pytest.raises(LockTimeout), second.transaction():
            pass
        assert time.monotonic() - started >= 0.25


def test_inbox_claims_each_event_once_and_cleans_up(tmp_path):
    db = connect(f"sqlite:///{tmp_path}/a.db")
    inbox = Inbox(db, "g")
    inbox.create_schema()
    with db.transaction() as tx:
        assert inbox.claim(tx, "e1")
        assert not inbox.claim(tx, "e1")
    with pytest.raises(RuntimeError), db.transaction() as tx:
        assert inbox.claim(tx, "e2")
        raise RuntimeError("rolled back: e2 must be processed again")
    assert inbox.seen("e1") and not inbox.seen("e2")
    assert Inbox(db, "other-group").create_schema() is None
    assert inbox.cleanup(older_than_ms=60_000) == 0
    time.sleep(0.02)
    assert inbox.cleanup(older_than_ms=1) == 1
    assert not inbox.seen("e1")


def test_outbox_rows_are_pending_in_id_order_per_shard(tmp_path):
    db = connect(f"sqlite:///{tmp_path}/a.db")
    outbox = Outbox(db, shards=4)
    outbox.create_schema()
    with db.transaction() as tx:
        for n in range(10):
            outbox.add(tx, "out", f"k{n % 3}", f"v{n}", headers=[("h", b"1")])
    with pytest.raises(RuntimeError), db.transaction() as tx:
        outbox.add(tx, "out", "k0", "never")
        raise RuntimeError("business transaction failed: no event")
    with db.transaction() as tx:
        rows = outbox.pending(tx, 100)
        assert [r.value for r in rows] == [f"v{n}".encode() for n in range(10)]
        assert rows[0].headers == [("h", b"1")]
        shard = shard_of(b"k1", 4)
        assert all(r.key == b"k1" or r.shard == shard for r in outbox.pending(tx, 100, [shard]))
        outbox.mark_published(tx, [r.id for r in rows[:4]])
    assert outbox.backlog() == 6


def test_json_decoder_flags_poison():
    assert json_decoder(b'{"a": 1}') == {"a": 1}
    with pytest.raises(DecodeError):
        json_decoder(b"\xff{")


def test_sqlite_writes_from_two_threads_serialize(tmp_path):
    url = f"sqlite:///{tmp_path}/a.db"
    setup = connect(url)
    setup.script(["CREATE TABLE c (n INTEGER)"])
    setup.execute("INSERT INTO c VALUES (0)")

    def bump() -> None:
        db = connect(url)
        for _ in range(50):
            with db.transaction() as tx:
                (n,) = tx.fetchone("SELECT n FROM c")
                tx.execute("UPDATE c SET n = ?", (n + 1,))

    threads = [threading.Thread(target=bump) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sqlite3.connect(f"{tmp_path}/a.db").execute("SELECT n FROM c").fetchone() == (150,)


def test_inbox_claims_a_batch_in_one_statement(tmp_path):
    db = connect(f"sqlite:///{tmp_path}/a.db")
    inbox = Inbox(db, "g")
    inbox.create_schema()
    with db.transaction() as tx:
        assert inbox.claim(tx, "e1")
        new = inbox.claim_many(tx, ["e1", "e2", "e3", "e2", *[f"x{n}" for n in range(900)]])
    assert new == {"e2", "e3", *[f"x{n}" for n in range(900)]}
    with db.transaction() as tx:
        assert inbox.claim_many(tx, ["e3", "e4"]) == {"e4"}


def _open_database(path: str) -> str:
    try:
        with connect(f"sqlite:///{path}"):
            return "ok"
    except Exception as error:  # reported back to the parent
        return repr(error)


def test_processes_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path):
    """Switching a new file to WAL races between processes; SQLite answers 'database is
    locked' without its busy handler, so connect() retries."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(6) as pool:
        for attempt in range(8):
            path = str(tmp_path / f"race-{attempt}.db")
            assert pool.map(_open_database, [path] * 6) == ["ok"] * 6
