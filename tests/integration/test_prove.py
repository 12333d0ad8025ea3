"""``onceflow prove`` end to end on the examples (examples/prove): every broken pipeline is
caught with the anomaly its article step predicts, every correct one holds, and bad input
is one line, exit 2, with nothing left running.

Each case names its schedule (``kills``) so that CI runs one trial per case; the full
seeded proofs and the 10-replay checks are under ``make stress`` (ONCEFLOW_STRESS=1).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.testing import prove

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prove"
STRESS = bool(os.environ.get("ONCEFLOW_STRESS"))


def runner_example(name: str, tmp_path: Path, **options: object):
    return prove(
        "runner",
        handler=f"{name}_pipeline:handle",
        config=EXAMPLES / name / "runner.toml",
        work_dir=tmp_path,
        records=120,
        **options,
    )


def command_example(
    script: str, tmp_path: Path, example: str = "command",
    outputs: tuple[str, ...] = ("table:orders",), **options: object,
):  # fmt: skip
    return prove(
        "command",
        command=[sys.executable, script],
        directory=EXAMPLES / example,
        input_topic="orders",
        outputs=list(outputs),
        schema=EXAMPLES / example / "schema.sql",
        work_dir=tmp_path,
        **options,
    )


BROKEN = [
    ("at_most_once", "after_kafka_commit:1", "missing", "offsets committed before the work"),
    ("at_least_once", "after_db_commit:1", "duplicated",
     "process-then-commit without deduplication"),
    ("producer_outside_transaction", "after_send_offsets:1", "duplicated",
     "non-transactional producer in a transactional loop"),
    ("separate_transactions", "after_work:1", "duplicated",
     "DB write and offset commit in separate transactions"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kills", "kind", "cause"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_runner_pipeline_is_caught(
    name: str, kills: str, kind: str, cause: str, tmp_path: Path
) -> None:
    proof = runner_example(name, tmp_path, seed=5, kills=kills)
    assert not proof.held
    assert proof.failure is not None
    assert proof.failure.trial.report.counts[kind] > 0, proof.failure.trial.report.counts
    assert f"--seed 5 --kills {kills}" in proof.failure.replay
    assert cause in [c.name for c in proof.causes]
    assert proof.verdict().startswith("exactly-once BROKEN")


CORRECT = [
    ("db_offsets", "after_work:2,after_db_commit:1,after_kafka_commit:2"),
    ("inbox", "before_db_commit:1,after_db_commit:2"),
    ("kafka_transactions", "after_produce:2,after_send_offsets:1"),
]


@pytest.mark.parametrize(("name", "kills"), CORRECT, ids=[c[0] for c in CORRECT])
def test_correct_runner_pattern_holds(name: str, kills: str, tmp_path: Path) -> None:
    proof = runner_example(name, tmp_path, seed=1, kills=kills)
    assert proof.held, proof.verdict()
    assert proof.kills == len(kills.split(","))
    assert proof.verdict().startswith("exactly-once held: ")


def test_plain_consumer_with_offsets_in_sqlite_holds(tmp_path: Path) -> None:
    proof = command_example("sqlite_offsets_consumer.py", tmp_path, seed=3, quick=True)
    assert proof.held, proof.verdict()
    assert proof.complete and proof.kills == proof.kills_planned == 4  # one per trigger


def test_auto_committing_consumer_duplicates_and_is_shrunk(tmp_path: Path) -> None:
    proof = command_example("auto_commit_consumer.py", tmp_path, seed=3, quick=True)
    assert proof.failure is not None
    assert len(proof.failure.schedule) == 1  # shrunk to one kill
    assert proof.failure.trial.report.counts["duplicated"] > 0
    assert "enable.auto.commit=true" in [c.name for c in proof.causes]


def totals_example(script: str, tmp_path: Path, **options: object):
    """A consumer of orders keeping running totals per store: no row per event, so the
    proof compares the table with the totals computed from the input."""
    return command_example(
        script, tmp_path, "totals", ("table:store_totals",),
        generator="store_orders:order", expect="store_orders:totals",
        id_field="order_id", key_field="store", **options,
    )  # fmt: skip


def test_running_totals_kept_with_their_offsets_hold(tmp_path: Path) -> None:
    proof = totals_example("totals_consumer.py", tmp_path, seed=3, quick=True)
    assert proof.held, proof.verdict()
    assert proof.complete and proof.kills == proof.kills_planned == 4


def test_running_totals_with_auto_commit_are_wrong_values(tmp_path: Path) -> None:
    proof = totals_example("totals_auto_commit_consumer.py", tmp_path, seed=3, quick=True)
    assert proof.failure is not None
    counts = proof.failure.trial.report.counts
    assert counts["wrong_value"] > 0 and counts["duplicated"] == 0, counts
    assert "--generator store_orders:order --expect store_orders:totals" in proof.failure.replay


@pytest.mark.skipif(not STRESS, reason="long: make stress")
@pytest.mark.parametrize("name", [b[0] for b in BROKEN])
def test_quick_proof_finds_the_bug_and_its_replay_reproduces_it_10_times(
    name: str, tmp_path: Path
) -> None:
    proof = runner_example(name, tmp_path / "proof", seed=11, quick=True)
    assert proof.failure is not None
    kills = ",".join(str(k) for k in proof.failure.schedule)
    for replay in range(10):
        again = runner_example(name, tmp_path / f"replay{replay}", seed=11, kills=kills)
        assert not again.held, f"replay {replay} of {kills} held"


SPARK = EXAMPLES / "spark"


def spark_example(job: str, work_dir: Path, kills: str = "progress:10"):
    return prove(
        "spark",
        command=[job],
        directory=SPARK,
        input_topic="orders",
        outputs=["table:orders"],
        schema=SPARK / "schema.sql",
        work_dir=work_dir,
        records=60,
        seed=3,
        kills=kills,
        stall_s=600,
    )


@pytest.mark.skipif(not STRESS, reason="long (a JVM per life): make stress")
@pytest.mark.parametrize(("job", "held"), [("foreach_batch_append.py", False),
                                           ("onceflow_sink_job.py", True)])  # fmt: skip
def test_spark_job_is_proved(job: str, held: bool, tmp_path: Path) -> None:
    proof = spark_example(job, tmp_path)
    assert proof.held is held, proof.verdict()


def test_a_spark_sink_step_is_a_kill_point(tmp_path: Path) -> None:
    """A named step of onceflow's database sink (after its commit of batch 2): the whole job
    (driver, JVM and the Python worker that reached the step) is SIGKILLed there, restarted,
    and the output is exact."""
    proof = spark_example("onceflow_sink_job.py", tmp_path, kills="database.after_commit:2")
    (trial,) = proof.trials
    (landing,) = trial.run.landings
    assert landing.landed, landing.note
    assert proof.held and proof.complete, proof.verdict()


@pytest.mark.skipif(not STRESS, reason="long (a JVM per life): make stress")
def test_spark_foreach_batch_replay_reproduces_the_duplicates_10_times(tmp_path: Path) -> None:
    for replay in range(10):
        proof = spark_example("foreach_batch_append.py", tmp_path / f"replay{replay}")
        assert not proof.held, f"replay {replay} held"


ORDERS = EXAMPLES.parent / "orders"


@pytest.mark.skipif(not STRESS, reason="long (a JVM per life): make stress")
def test_the_orders_pipeline_is_proved_unchanged(tmp_path: Path) -> None:
    """examples/orders/pipeline.py as make demo runs it, its input from its own generator,
    store_revenue compared with the totals computed from that input."""
    proof = prove(
        "spark",
        command=["pipeline.py", "--bootstrap", "{bootstrap}", "--database-url",
                 "{database_url}", "--checkpoint-dir", "{checkpoint}",
                 "--trigger", "500 milliseconds", "--max-offsets-per-trigger", "40"],
        directory=ORDERS,
        input_topic="orders",
        topics_file=ORDERS / "topics.yaml",
        outputs=["table:store_revenue", "topic:order-confirmations"],
        generator="generator:order",
        expect="proof:revenue",
        id_field="order_id",
        key_field="store",
        work_dir=tmp_path,
        records=300,
        seed=3,
        quick=True,
        stall_s=600,
    )  # fmt: skip
    assert proof.held, proof.verdict()
    assert proof.mid_processing >= 1


def run_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``onceflow prove ARGS`` with ``--work-dir`` before the pipeline's own ``--``."""
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    words[at:at] = ["--work-dir", str(tmp_path)]
    return subprocess.run(
        [sys.executable, "-m", "onceflow", "prove", *words],
        capture_output=True, text=True, timeout=180, cwd=EXAMPLES / "command",
    )  # fmt: skip


def leftovers(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if marker in line and "ps -eo" not in line]


COMMAND = ["command", "--input", "orders", "--output", "table:orders", "--schema", "schema.sql"]
BAD_INPUT = [
    (["runner", "nosuch_module:handle", "--config", str(EXAMPLES / "db_offsets" / "runner.toml")],
     "cannot import handler module 'nosuch_module'"),
    (["command", "--input", "orders", "--", sys.executable, "-c", "pass"],
     "no outputs declared"),
    ([*COMMAND, "--", sys.executable, "-c", "import sys; sys.exit('no config given')"],
     "exited at once with code 1: no config given"),
    ([*COMMAND, "--timeout", "3", "--", sys.executable, "-c", "import time; time.sleep(987.25)"],
     "wrote no output in 3 s"),
    ([*COMMAND, "--id-field", "order_id", "--quick", "--kills", "progress:5", "--",
      sys.executable, "sqlite_offsets_consumer.py"], "wrong mapping: column 'order_id'"),
    (["command", "--input", "orders", "--output", "table:orderz", "--schema", "schema.sql",
      "--timeout", "5", "--", sys.executable, "sqlite_offsets_consumer.py"],
     "table 'orderz' is not in its database (it has offsets, orders)"),
    (["command", "--input", "payments", "--output", "table:orders", "--timeout", "8", "--",
      sys.executable, "subscribe_consumer.py", "--mode", "fixed", "--input", "orders",
      "--db", "{database_path}"],
     "it never asked for 'payments', only for orders: is --input the topic it consumes?"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[m[:20] for _, m in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_nothing_left(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = run_cli(*args, tmp_path=tmp_path)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert leftovers(str(tmp_path)) == []  # no broker of this run
    if "time.sleep(987.25)" in " ".join(args):  # nor the pipeline (only this test runs it)
        assert leftovers("time.sleep(987.25)") == []


def test_a_cluster_prove_cannot_reach_is_its_own_failure_exit_5(tmp_path: Path) -> None:
    result = run_cli(*COMMAND, "--bootstrap", "127.0.0.1:1", "--", sys.executable,
                     "sqlite_offsets_consumer.py", tmp_path=tmp_path)  # fmt: skip
    assert result.returncode == 5, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: prove could not run the proof: cannot reset")
    assert "is the cluster up" in errors[0]
