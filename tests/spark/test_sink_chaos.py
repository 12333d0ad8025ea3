"""Both sinks stay exactly-once when the driver is SIGKILLed mid-batch or between the
sink's commit and Spark's commit: the query is run in a subprocess that kills its whole
process group at a crash point, restarted on the same checkpoint, and audited."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.testing import APACHE_KAFKA_GROUP
from onceflow.verify.run import run_verify
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.spark.conftest import ENGINES, create_topic
from tests.spark.sink_helpers import assert_append_and_accumulate_exact, make_orders

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).with_name("sink_job.py")
ROOT = JOB.parents[2]
ORDERS = 120  # 3 batches of maxOffsetsPerTrigger=40


def run_job(tmp_path: Path, crash_at: str | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_SPARK_CRASH")}
    crash_file = tmp_path / "crashes.txt"
    if crash_at:
        env["ONCEFLOW_SPARK_CRASH_AT"] = crash_at
        env["ONCEFLOW_SPARK_CRASH_FILE"] = str(crash_file)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    result = subprocess.run(
        [sys.executable, str(JOB), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,  # its own process group: the crash kills all of it
    )
    (tmp_path / "job.log").open("a").write(f"--- {crash_at}\n{result.stdout}\n{result.stderr}\n")
    if crash_at:
        assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
        step, _, where = crash_at.partition("@")
        assert f"SIGKILL at {step} batch={where.split('/')[0]}" in crash_file.read_text()
    else:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def crash_and_restart(tmp_path: Path, crashes: list[str], *args: str) -> None:
    """One run per crash point (each must SIGKILL the driver), then one to finish. The
    killed drivers' temporary files were in folders of their own (``onceflow.spark.scratch``),
    removed by the time the last run's session started."""
    killed = [scratch_of(run_job(tmp_path, crash_at, *args)) for crash_at in crashes]
    finished = run_job(tmp_path, None, *args)
    scratch = scratch_of(finished)
    assert f"java.io.tmpdir={scratch}" in finished.stdout
    assert "'blockmgr-" in finished.stdout, finished.stdout[-2000:]  # Spark's own folder in it
    left = [folder for folder in killed if folder.exists()]
    assert not left, f"a killed driver's temporary files were not removed: {left}"


def scratch_of(result: subprocess.CompletedProcess) -> Path:
    """The driver's scratch folder, from the job's ``scratch PATH`` line."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("scratch /")]
    assert lines, result.stdout[-2000:]
    return Path(lines[0].split()[1])


# CI runs every crash point once, on one database per strategy; `make stress` runs the
# other pairs too.
STRESS = bool(os.environ.get("ONCEFLOW_STRESS"))
STRESS_ONLY = pytest.mark.skipif(not STRESS, reason="in make stress (ONCEFLOW_STRESS=1)")


@pytest.mark.parametrize(
    "engine,database,strategy,crashes",
    [
        # Inside a direct task's open transaction (rolled back when the connection drops),
        # after a direct task committed (stress), then between the DB commit and Spark's
        # commit.
        pytest.param(
            "onceflow",
            "sqlite",
            "direct",
            [
                "database.before_task_commit@1/0",
                # in make test: the quick chaos matrix's spark/database_sink cell
                *(["database.after_task_commit@1/1"] if STRESS else []),
                "database.after_commit@2",
            ],
            id="onceflow-sqlite-direct",
        ),
        # Mid-batch on Apache Kafka's 3-node cluster (RF=3, min.insync.replicas=2).
        pytest.param(
            "apache-kafka",
            "sqlite",
            "direct",
            ["database.before_task_commit@1/0"],
            id="apache-kafka-sqlite-direct",
            marks=pytest.mark.xdist_group(APACHE_KAFKA_GROUP),
        ),
        # mid-batch (one task staged), then between the DB commit and Spark's commit
        pytest.param(
            "onceflow",
            "postgresql",
            "staged",
            ["database.after_stage@1/1", "database.after_commit@1"],
            id="onceflow-postgresql-staged",
        ),
        pytest.param(
            "onceflow",
            "sqlite",
            "staged",
            ["database.after_stage@1/1", "database.after_commit@2"],
            id="onceflow-sqlite-staged",
            marks=STRESS_ONLY,
        ),
        pytest.param(
            "onceflow",
            "postgresql",
            "direct",
            ["database.before_task_commit@1/0", "database.after_commit@2"],
            id="onceflow-postgresql-direct",
            marks=STRESS_ONLY,
        ),
    ],
    indirect=["engine"],
)
def test_database_sink_survives_driver_kills(
    request, engine, topic, tmp_path, database, strategy, crashes
):
    """An append query and an accumulate query (per-store totals) in one driver: the
    first to reach the crash point takes both down."""
    url = database_url(request, tmp_path, database)
    bootstrap = engine.bootstrap
    orders = make_orders(bootstrap, topic, ORDERS)
    args = ["--bootstrap", bootstrap, "--topic", topic, "--checkpoint", str(tmp_path / "cp")]
    args += ["--sink-id", "orders", "--database-url", url, "--strategy", strategy]
    crash_and_restart(tmp_path, crashes, *args, "--mode", "append,accumulate")
    assert len(orders) == ORDERS
    assert_append_and_accumulate_exact(bootstrap, topic, url, orders)


def database_url(request, tmp_path: Path, database: str) -> str:
    if database == "postgresql":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'out.db'}"


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_kafka_sink_survives_driver_kills(engine, topic, tmp_path):
    bootstrap = engine.bootstrap
    out = f"{topic}-out"
    create_topic(bootstrap, out, partitions=3)
    make_orders(bootstrap, topic, ORDERS)
    args = ["--bootstrap", bootstrap, "--topic", topic, "--checkpoint", str(tmp_path / "cp")]
    args += ["--sink-id", f"{topic}-confirm", "--output-topic", out]
    crashes = ["kafka.after_task_commit@1/0"]  # mid-batch: task 0 committed, task 1 did not
    if engine.name == "onceflow":
        crashes.append("kafka.before_commit@2")  # every task committed, Spark's commit lost
    crash_and_restart(tmp_path, crashes, *args)
    report = run_verify(
        bootstrap, topic, id_field="order_id", key_field="store", output_topic=out, timeout=30
    )
    assert report.ok, report.to_json()
    assert report.sinks[0].records == ORDERS
