"""onceflow prove's pure logic: seeded fault schedules, their text form, shrinking, the
steps a Runner reaches, the input generator, the code a pipeline runs and the cheap cause
detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.faults.results import Landing
from onceflow.faults.schedule import (
    BROKER,
    KILL,
    NETWORK,
    PROGRESS,
    Fault,
    ScheduleError,
    format_schedule,
    parse_schedule,
    progress_schedule,
    request_schedule,
    step_mix,
    step_sweep,
)
from onceflow.patterns.guarantees import plan
from onceflow.prove.errors import ProveError
from onceflow.prove.explain import (
    AUTO_COMMIT,
    CONSUMER_COMMIT,
    PRODUCER,
    READ_UNCOMMITTED,
    consumer_commits,
    database_commits,
)
from onceflow.prove.generator import input_records
from onceflow.prove.outputs import Output, parse_outputs
from onceflow.prove.reachable import reachable_source
from onceflow.prove.runner_file import RunnerFile
from onceflow.prove.shrink import shrink
from onceflow.prove.steps import ONCE_PER_START, runner_steps, spark_sink_steps

STEPS = ["after_consume", "after_work", "after_db_commit", "after_lock_assignment"]


def test_same_seed_same_schedules_other_seed_other_schedules() -> None:
    assert step_sweep(STEPS, 7, 2) == step_sweep(STEPS, 7, 2)
    assert step_mix(STEPS, 7, 6) == step_mix(STEPS, 7, 6)
    assert progress_schedule(7, 4, 600) == progress_schedule(7, 4, 600)
    triggers = (PROGRESS, "request_sent", "request_applied")
    assert request_schedule(7, 3, triggers) == request_schedule(7, 3, triggers)
    assert any(step_mix(STEPS, 7, 6) != step_mix(STEPS, s, 6) for s in range(8, 12))


def test_sweep_kills_every_step_and_once_per_start_steps_only_first() -> None:
    schedules = step_sweep(STEPS, 3, 3, once_per_start=ONCE_PER_START)
    assert [s[0].trigger for s in schedules] == STEPS
    assert all(k.occurrence == 1 for k in schedules[-1])
    assert all(1 <= k.occurrence <= 3 for s in schedules for k in s)


def test_sweeps_and_mixes_spread_faults_over_workers() -> None:
    faults = [f for s in step_sweep(STEPS, 3, 3, workers=3) for f in s]
    assert {f.worker for f in faults} == {1, 2, 3}
    assert {f.worker for f in step_mix(STEPS, 3, 1)} == {1}


def test_a_quick_command_schedule_uses_every_trigger_once() -> None:
    triggers = (PROGRESS, "request_sent", "request_applied")
    for seed in range(20):
        assert sorted(f.trigger for f in request_schedule(seed, 3, triggers)) == sorted(triggers)


def test_schedule_text_round_trips_and_bad_text_is_one_error() -> None:
    schedule = (
        Fault("after_work", 2),
        Fault("after_db_commit", 1, worker=3),
        Fault("request_applied", 2, BROKER),
        Fault(PROGRESS, 12, NETWORK, 2),
    )
    text = format_schedule(schedule)
    assert text == "after_work:2,after_db_commit:1@3,broker/request_applied:2,network/progress:12@2"
    assert parse_schedule(text, STEPS) == schedule
    assert parse_schedule("progress:4")[0] == Fault(PROGRESS, 4, KILL, 1)
    with pytest.raises(ScheduleError, match="unknown step 'nope'"):
        parse_schedule("nope:1", STEPS)
    with pytest.raises(ScheduleError, match="expected"):
        parse_schedule("after_work:x")
    with pytest.raises(ScheduleError, match="unknown fault 'explode'"):
        parse_schedule("explode/progress:1")
    with pytest.raises(ScheduleError, match="N counts from 1"):
        parse_schedule("progress:0")


def test_faults_say_where_they_are_triggered() -> None:
    assert Fault("after_db_commit").at_crash_point
    assert Fault("database.after_commit", 2).at_spark_step
    assert Fault("offset_commit_sent").at_request and not Fault("offset_commit_sent").at_crash_point
    assert not Fault(PROGRESS).at_crash_point and not Fault(PROGRESS).at_request


def test_shrink_finds_the_single_guilty_fault() -> None:
    guilty = Fault("after_db_commit", 2)
    schedule = (Fault("after_consume", 1), guilty, Fault("after_work", 3))
    assert shrink(schedule, lambda s: guilty in s) == (guilty,)


def test_shrink_tries_exact_faults_before_those_timed_by_outputs() -> None:
    tried = []
    timed, exact = Fault(PROGRESS, 5), Fault("request_sent", 1)
    shrink((timed, exact), lambda s: tried.append(s) or True)
    assert tried == [(exact,)]


def test_shrink_keeps_a_pair_that_only_fails_together() -> None:
    a, b, c = Fault("a", 1), Fault("b", 1), Fault("c", 1)
    assert shrink((a, c, b), lambda s: a in s and b in s) == (a, b)


def test_shrink_respects_its_budget() -> None:
    calls = []
    shrink(tuple(Fault(f"s{i}", 1) for i in range(10)), lambda s: calls.append(s) or False, 4)
    assert len(calls) == 4


@pytest.mark.parametrize(
    ("guarantee", "pattern", "database", "expected"),
    [
        ("exactly_once", "db_offsets", True, "after_store_offset"),
        ("exactly_once", "db_offsets", True, "after_seek"),
        ("exactly_once", "kafka_transactions", False, "after_send_offsets"),
        ("at_most_once", None, True, "after_kafka_commit"),
    ],
)
def test_runner_steps_follow_the_pattern(
    guarantee: str, pattern: str | None, database: bool, expected: str
) -> None:
    steps = runner_steps(plan(guarantee, pattern, has_database=database), database)
    assert expected in steps
    assert steps[0] in ("after_consume", "after_lock_assignment")
    if guarantee == "at_most_once":  # the commit comes before the work
        assert steps.index("after_kafka_commit") < steps.index("after_db_commit")


def test_generator_numbers_each_key_from_zero() -> None:
    records = list(input_records(10, 3))
    assert [r.id for r in records[:4]] == ["k0-0", "k1-0", "k2-0", "k0-1"]
    assert len({r.id for r in records}) == 10


def test_outputs_must_be_declared_and_well_formed() -> None:
    with pytest.raises(ProveError, match="no outputs declared"):
        parse_outputs([])
    with pytest.raises(ProveError, match="table:NAME or topic:NAME"):
        parse_outputs(["orders"])
    assert parse_outputs(["topic:x"]) == [Output("topic", "x")]


def test_runner_file_puts_the_runner_on_the_trials_database(tmp_path: Path) -> None:
    path = tmp_path / "runner.toml"
    path.write_text('[runner]\ngroup_id = "g"\ntopics = ["t"]\ndatabase_url = "sqlite:///a.db"\n')
    trial = f"sqlite:///{tmp_path / 'trial' / 'a.db'}"
    config = RunnerFile.load(path).config("127.0.0.1:1", trial)
    assert config.database_url == trial
    assert config.assign is False and config.batch_size <= 25  # subscribes, as written


def test_runner_file_on_postgresql_names_its_server(tmp_path: Path) -> None:
    path = tmp_path / "runner.toml"
    path.write_text('[runner]\ntopics = ["t"]\ndatabase_url = "postgresql://u@h:5/app"\n')
    file = RunnerFile.load(path)
    assert file.postgres_server == "postgresql://u@h:5/app"
    assert file.database_name == "app.db"  # the trial's database, whatever its server


def test_runner_file_refuses_what_the_runner_refuses(tmp_path: Path) -> None:
    path = tmp_path / "runner.toml"
    path.write_text('[runner]\ntopics = ["t"]\nconsumer_config = {"enable.auto.commit" = true}\n')
    with pytest.raises(ProveError, match=r"enable\.auto\.commit"):
        RunnerFile.load(path).plan()


def test_cause_patterns() -> None:
    assert AUTO_COMMIT.search('"enable.auto.commit": True')
    assert not AUTO_COMMIT.search('"enable.auto.commit": False')
    assert READ_UNCOMMITTED.search('"isolation.level": "read_uncommitted"')
    assert PRODUCER.search("p = Producer({...})")
    assert CONSUMER_COMMIT.search("consumer.commit(asynchronous=False)")


def test_commits_are_found_whatever_the_variables_are_called() -> None:
    text = """
c = Consumer({"group.id": "g"})
store = sqlite3.connect(path)
while True:
    with store:
        store.execute("INSERT ...")
    c.commit(asynchronous=False)
"""
    (commit,) = consumer_commits(text)
    (database,) = database_commits(text)
    assert database < commit


def test_reachable_code_leaves_out_the_main_block_of_a_handlers_module() -> None:
    module = """
import sqlite3

def helper(x):
    return x + 1

def unused():
    sqlite3.connect("never.db")

def handle(record, ctx):
    ctx.tx.execute("INSERT ...", (helper(1),))

if __name__ == "__main__":
    sqlite3.connect("debug.db")
"""
    runs = reachable_source(module, "handle")
    assert "def handle" in runs and "def helper" in runs
    assert "debug.db" not in runs and "never.db" not in runs
    script = reachable_source(module)  # run as a script, the main block runs
    assert "debug.db" in script and "never.db" not in script


def test_a_spark_job_names_the_steps_of_the_sinks_it_uses() -> None:
    assert spark_sink_steps('df.writeStream.format("onceflow-database")')[-1] == (
        "database.after_commit"
    )
    assert "database.after_stage" in spark_sink_steps(
        '.format("onceflow-database").option("strategy", "staged")'
    )
    assert spark_sink_steps(".format('onceflow-kafka')")[0] == "kafka.before_task_commit"
    assert spark_sink_steps("df.writeStream.foreachBatch(f)") == []


def fake_proof(tmp_path: Path, broken: bool):
    from onceflow.faults.results import RunResult
    from onceflow.faults.workers import Ending, Life
    from onceflow.prove.proof import Failure, Proof
    from onceflow.prove.trial import TrialResult
    from onceflow.verify.audit import InputEvent, OutputRecord, Sink, audit

    events = [InputEvent(f"k0-{n}", "k0", 0, n) for n in range(3)]
    rows = [OutputRecord(e.id, e.key, n) for n, e in enumerate(events)]
    if broken:
        rows.append(OutputRecord("k0-2", "k0", 3))
    report = audit(events, [Sink("table:orders", rows)])
    trials = []
    for number, step in enumerate(["after_work", "after_db_commit"], 1):
        kill = Fault(step, 1)
        run = RunResult(
            [Landing(kill, True, 1.0, 2)],
            [Life(1, 1, kill, True, Ending.CRASH_POINT, -9, 1.0, 0, 2),
             Life(1, 2, None, False, Ending.STOPPED, 0, 1.0, 2, 3)],
            outputs=3,
        )  # fmt: skip
        ok_report = audit(events, [Sink("table:orders", rows[:3])])
        chosen = report if step == "after_db_commit" else ok_report
        trials.append(TrialResult(number, (kill,), run, chosen, 2.0, tmp_path))
    failure = Failure(trials[1], "onceflow prove ... --seed 3 --kills after_db_commit:1")
    return Proof("runner", "m:h --config r.toml", 3, ["after_work", "after_db_commit"], trials,
                 failure if broken else None, [], 4.0, "onceflow prove ... --seed 3")  # fmt: skip


@pytest.mark.parametrize("broken", [False, True])
def test_reports_say_the_verdict_everywhere(broken: bool, tmp_path: Path) -> None:
    import json

    from onceflow.prove.heatmap import draw
    from onceflow.prove.report import to_json, to_markdown

    proof = fake_proof(tmp_path, broken)
    verdict = proof.verdict()
    if broken:
        assert verdict == "exactly-once BROKEN: 1 duplicated after 1 kill (after_db_commit:1)"
    else:
        assert verdict == "exactly-once held: 2 kills at 2 distinct steps, 0 anomalies"
    document = json.loads(to_json(proof))
    assert document["verdict"] == verdict and document["kills_mid_processing"] == 2
    assert (document["failure"] is not None) is broken
    assert verdict in to_markdown(proof, "p.png")
    pytest.importorskip("matplotlib")
    assert draw(proof, tmp_path / "p.png") is not None and (tmp_path / "p.png").stat().st_size


def test_a_proof_with_a_fault_that_never_landed_says_it_is_incomplete(tmp_path: Path) -> None:
    proof = fake_proof(tmp_path, broken=False)
    missed = Fault("after_kafka_commit", 3)
    trial = proof.trials[0]
    trial.schedule = (*trial.schedule, missed)
    trial.run.landings.append(Landing(missed, False, 2.0, 3, "the pipeline drained its input "
                                      "before it"))  # fmt: skip
    assert not proof.complete
    assert "INCOMPLETE: 2 of 3 planned faults landed (the pipeline drained" in proof.verdict()


def test_duplicates_after_only_coordinator_cuts_blame_an_unfenced_zombie(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from onceflow.faults.schedule import COORDINATOR_CUT
    from onceflow.prove.explain import explain

    target = SimpleNamespace(
        plan=None, sources={}, outputs=[], mapping=SimpleNamespace(id_field="id")
    )
    proof = fake_proof(tmp_path, broken=True)
    broken = proof.trials[1]
    assert "a zombie's writes not fenced" not in [c.name for c in explain(target, [broken])]
    cut = Fault(PROGRESS, 8, COORDINATOR_CUT)
    broken.schedule = (cut,)
    broken.run.landings[:] = [Landing(cut, True, 1.0, 2)]
    causes = explain(target, [broken])
    assert [c.name for c in causes] == ["a zombie's writes not fenced"]
    assert "compare-and-set" in causes[0].fix


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ('spark.readStream.format("onceflow").option("subscribe", t).load()', "startingOffsets"),
        ('Consumer({"group.id": "g"}); c.subscribe([t])', "auto.offset.reset"),
        ('spark.readStream.format("onceflow").option("startingOffsets", "earliest")', None),
        ('Consumer({"group.id": "g", "auto.offset.reset": "earliest"})', None),
    ],
)
def test_missing_first_records_blame_a_start_at_the_latest_offsets(
    tmp_path: Path, source: str, named: str | None
) -> None:
    """Each partition's first records missing, nothing else: a pipeline that starts at
    the latest offsets never read them. Missing records elsewhere are not that."""
    from types import SimpleNamespace

    from onceflow.prove.explain import explain
    from onceflow.verify.audit import InputEvent, OutputRecord, Sink, audit

    target = SimpleNamespace(
        plan=None, sources={"job.py": source}, outputs=[], mapping=SimpleNamespace(id_field="id")
    )
    events = [InputEvent(f"k{p}-{n}", f"k{p}", p, n) for p in (0, 1) for n in range(5)]
    proof = fake_proof(tmp_path, broken=False)
    trial = proof.trials[0]

    def causes(read):
        rows = [OutputRecord(e.id, e.key, i) for i, e in enumerate(e for e in events if read(e))]
        trial.report = audit(events, [Sink("table:orders", rows)])
        return [c for c in explain(target, [trial]) if c.name == "starts at the latest offsets"]

    found = causes(lambda e: e.offset >= (2 if e.partition == 0 else 1))
    if named is None:
        assert found == []
        return
    assert len(found) == 1 and named in found[0].evidence and "earliest" in found[0].fix
    assert "partition 0: offsets 0-1, partition 1: offsets 0-0" in found[0].evidence
    assert causes(lambda e: e.offset != 3) == []  # a record lost in the middle
