"""Small pieces of the fault engine: the pause fault's text, which worker a pause stops,
which process group a Spark crash point kills, the output probe on a SQLite file, and the
input a paced run lets in."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from onceflow.crash_points import SESSION_GROUP, _crash_group
from onceflow.faults.commit_traps import CommitTrapControl
from onceflow.faults.outputs import Output
from onceflow.faults.probe import OutputProbe
from onceflow.faults.run import FaultRun
from onceflow.faults.schedule import NETWORK_ACTIONS, PAUSE, PROGRESS, parse_fault
from onceflow.faults.slack import WATCH_WINDOW, Slack


def test_pause_is_a_fault_that_needs_a_proxy() -> None:
    fault = parse_fault("pause/progress:19@2")
    assert (fault.action, fault.trigger, fault.occurrence, fault.worker) == (
        PAUSE, PROGRESS, 19, 2)  # fmt: skip
    assert str(fault) == "pause/progress:19@2"
    assert PAUSE in NETWORK_ACTIONS  # its connections drop while it is stopped


def test_the_busiest_worker_is_the_one_that_committed_outputs_last(tmp_path: Path) -> None:
    control = CommitTrapControl(tmp_path, workers=3)
    assert control.busiest() is None
    for worker in (3, 1):
        (tmp_path / f"seen-{worker}").touch()
        time.sleep(0.01)
    assert control.busiest() == 1
    os.utime(tmp_path / "seen-3")  # worker 3 commits again
    assert control.busiest() == 3


def test_a_spark_crash_point_kills_the_group_it_is_told() -> None:
    assert _crash_group(None) is None and _crash_group("") is None
    assert _crash_group("1234") == 1234
    assert _crash_group(SESSION_GROUP) == os.getsid(0)


def test_the_probe_counts_rows_written_by_connections_that_close_after_each_commit(
    tmp_path: Path,
) -> None:
    """As the Spark database sink's tasks write: open, insert, commit, close. Each last close
    checkpoints the WAL and removes it; the probe's next look makes the WAL index again with
    the same header, so the headers it watches show nothing (it once reported 0 rows all
    through a run that wrote 60, and a proof ended before its fault)."""
    database = tmp_path / "outputs.db"
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("CREATE TABLE orders (id TEXT)")
        connection.commit()
    probe = OutputProbe([Output("table", "orders")], "127.0.0.1:1", f"sqlite:///{database}")
    try:
        assert probe.count() == 0
        for number in range(3):
            with closing(sqlite3.connect(database)) as connection:
                connection.execute("INSERT INTO orders VALUES (?)", (str(number),))
                connection.commit()
        deadline = time.monotonic() + 5
        while probe.count() != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert probe.count() == 3
    finally:
        probe.close()


def test_a_worker_stopped_at_an_any_trap_that_was_not_the_fault_is_let_go(tmp_path: Path) -> None:
    """Two workers reach their N-th commit together and both stop themselves; the fault
    takes one, the other is a stray the run must send SIGCONT (it sat stopped until its
    group's session expired: a three-worker proof stalled 45 s)."""
    traps = CommitTrapControl(tmp_path, workers=2)
    fault = parse_fault("db_commit:1@any")
    traps.arm(fault)
    for worker in (1, 2):  # what the pipeline's hook writes before it stops itself
        (tmp_path / f"sprung-{worker}").write_text(f"{traps.generation}\n")
    assert traps.strays(now=0.0) == []  # both held by the armed fault, for now
    chosen = traps.sprung(fault)
    assert chosen == 1
    traps.disarm_all(fault, chosen)
    assert traps.strays(now=1.0) == [2]
    assert traps.strays(now=1.5) == [2]  # SIGCONT again: it may have stopped only now
    assert traps.strays(now=1.0 + traps.STRAY_S + 0.1) == [2]  # the last time
    assert traps.strays(now=3.0) == []
    late = tmp_path / "sprung-2"  # a worker that read its arm file before the disarm
    late.write_text(f"{traps.generation}\n")
    assert traps.strays(now=4.0) == [2]
    traps.strays(now=5.1)  # forgotten after STRAY_S
    assert traps.strays(now=1.0 + traps.WATCH_S + 5.0) == []
    late.write_text(f"{traps.generation}\n")  # long after the disarm: no more reads
    assert traps.strays(now=1.0 + traps.WATCH_S + 6.0) == []
    traps.arm(fault)  # a new generation springs afresh
    assert traps.sprung(fault) is None


def test_the_slack_waits_out_a_pipeline_that_writes_every_few_seconds() -> None:
    """A pipeline that writes every 5 s is not idle after 2 s quiet (its slack grew at every
    write and the input ran out before the faults: INCOMPLETE on a correct pipeline)."""
    slack = Slack(settle_s=2.0, reading_s=6.0)
    for _ in range(5):
        slack.output_grew(5.0)
    assert not slack.idle(now=106.0, last_growth=100.0, outputs=10)
    assert slack.idle(now=108.0, last_growth=100.0, outputs=10)


def test_the_slack_grows_again_when_what_it_let_in_was_lost() -> None:
    """A pipeline that drops what it reads (a broken revoke callback) writes nothing more
    at that output count: the slack grew once per count and the run starved until its stall
    limit (exit 2 instead of the missing records)."""
    slack = Slack(settle_s=2.0, reading_s=6.0)
    assert slack.idle(now=103.0, last_growth=100.0, outputs=61)
    slack.grow(batch=50, now=103.0)
    assert slack.records == 50
    assert not slack.idle(now=106.0, last_growth=100.0, outputs=61)  # still reading it, maybe
    assert slack.idle(now=109.5, last_growth=100.0, outputs=61)
    slack.grow(batch=50, now=109.5)
    assert slack.records == 100
    slack.reset()
    assert slack.records == 0


def test_the_slack_grows_once_while_the_pipeline_has_written_nothing() -> None:
    """A pipeline that wrote nothing yet is starting (three workers forming their group
    take seconds): input let in meanwhile would all go into its first commits, and the
    input would run out before the later faults. Lost input is regrown only after a write."""
    slack = Slack(settle_s=2.0, reading_s=6.0)
    assert slack.idle(now=103.0, last_growth=100.0, outputs=0)
    slack.grow(batch=50, now=103.0)
    assert not slack.idle(now=120.0, last_growth=100.0, outputs=0)


def test_the_load_under_a_fault_leaves_the_input_the_later_faults_need(tmp_path: Path) -> None:
    """A fresh-clone run's proof: pauses at progress 31, 19 and 39 of 300 records; while
    worker 1 was paused, worker 2 read all the 2 batches let in (162 -> 262 outputs) and
    then everything else, so progress:39 never came (INCOMPLETE)."""
    allowed: list[int | None] = []
    schedule = tuple(parse_fault(f) for f in ("pause/progress:19", "pause/progress:39"))
    run = FaultRun(lambda *_: None, schedule, tmp_path, workers=2, pace=allowed.append,  # type: ignore[arg-type]
                   input_records=300, batch_hint=50)  # fmt: skip
    run.outputs = 162
    run.watched.popleft()  # the first pause is the one under way
    run._load_under_fault(2)
    assert allowed == [300 - (39 + WATCH_WINDOW)]
    run.watched.popleft()  # none after it: the load is two batches
    run._load_under_fault(2)
    assert allowed[-1] == 162 + 2 * 50
