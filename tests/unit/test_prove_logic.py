"""onceflow prove's pure logic: seeded schedules, their text form, shrinking, the steps a
Runner reaches, the input generator and the cheap cause detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.patterns.guarantees import plan
from onceflow.prove.errors import ProveError
from onceflow.prove.explain import AUTO_COMMIT, CONSUMER_COMMIT, PRODUCER, READ_UNCOMMITTED
from onceflow.prove.generator import input_records
from onceflow.prove.outputs import Output, parse_outputs
from onceflow.prove.runner_file import RunnerFile
from onceflow.prove.schedule import (
    Kill,
    format_schedule,
    parse_schedule,
    progress_schedule,
    runner_mixed,
    runner_sweep,
)
from onceflow.prove.shrink import shrink
from onceflow.prove.steps import runner_steps

STEPS = ["after_consume", "after_work", "after_db_commit", "after_lock_assignment"]


def test_same_seed_same_schedules_other_seed_other_schedules() -> None:
    assert runner_sweep(STEPS, 7, 2) == runner_sweep(STEPS, 7, 2)
    assert runner_mixed(STEPS, 7, 6) == runner_mixed(STEPS, 7, 6)
    assert progress_schedule(7, 4, 600) == progress_schedule(7, 4, 600)
    assert any(runner_mixed(STEPS, 7, 6) != runner_mixed(STEPS, s, 6) for s in range(8, 12))


def test_sweep_kills_every_step_and_once_per_start_steps_only_first() -> None:
    schedules = runner_sweep(STEPS, 3, 3)
    assert [s[0].step for s in schedules] == STEPS
    assert all(k.occurrence == 1 for k in schedules[-1])
    assert all(1 <= k.occurrence <= 3 for s in schedules for k in s)


def test_schedule_text_round_trips_and_bad_text_is_one_error() -> None:
    schedule = (Kill("after_work", 2), Kill("after_db_commit", 1))
    assert parse_schedule(format_schedule(schedule), STEPS) == schedule
    with pytest.raises(ProveError, match="unknown step 'nope'"):
        parse_schedule("nope:1", STEPS)
    with pytest.raises(ProveError, match="expected STEP:N"):
        parse_schedule("after_work:x")


def test_shrink_finds_the_single_guilty_kill() -> None:
    guilty = Kill("after_db_commit", 2)
    schedule = (Kill("after_consume", 1), guilty, Kill("after_work", 3))
    assert shrink(schedule, lambda s: guilty in s) == (guilty,)


def test_shrink_keeps_a_pair_that_only_fails_together() -> None:
    a, b, c = Kill("a", 1), Kill("b", 1), Kill("c", 1)
    assert shrink((a, c, b), lambda s: a in s and b in s) == (a, b)


def test_shrink_respects_its_budget() -> None:
    calls = []
    shrink(tuple(Kill(f"s{i}", 1) for i in range(10)), lambda s: calls.append(s) or False, 4)
    assert len(calls) == 4


@pytest.mark.parametrize(
    ("guarantee", "pattern", "database", "expected"),
    [
        ("exactly_once", "db_offsets", True, "after_store_offset"),
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
        Output.parse("orders")
    assert parse_outputs(["topic:x"]) == [Output("topic", "x")]


def test_runner_file_moves_the_sqlite_file_into_the_trial(tmp_path: Path) -> None:
    path = tmp_path / "runner.toml"
    path.write_text('[runner]\ngroup_id = "g"\ntopics = ["t"]\ndatabase_url = "sqlite:///a.db"\n')
    config = RunnerFile.load(path).config("127.0.0.1:1", tmp_path / "trial")
    assert config.database_url == f"sqlite:///{tmp_path / 'trial' / 'a.db'}"
    assert config.assign is True and config.batch_size <= 25


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


def fake_proof(tmp_path: Path, broken: bool):
    from onceflow.prove.lives import LifeResult
    from onceflow.prove.proof import Failure, Proof
    from onceflow.verify.audit import InputEvent, OutputRecord, Sink, audit

    events = [InputEvent(f"k0-{n}", "k0", 0, n) for n in range(3)]
    rows = [OutputRecord(e.id, e.key, n) for n, e in enumerate(events)]
    if broken:
        rows.append(OutputRecord("k0-2", "k0", 3))
    report = audit(events, [Sink("table:orders", rows)])
    trials = []
    for number, step in enumerate(["after_work", "after_db_commit"], 1):
        kill = Kill(step, 1)
        lives = [LifeResult(kill, True, -9, 1.0, 0, 2), LifeResult(None, False, 0, 1.0, 2, 3)]
        ok_report = audit(events, [Sink("table:orders", rows[:3])])
        chosen = report if step == "after_db_commit" else ok_report
        from onceflow.prove.trial import TrialResult

        trials.append(TrialResult(number, (kill,), lives, chosen, 2.0, tmp_path))
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
