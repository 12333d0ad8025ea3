"""Both exactly-once sinks on a real Spark standalone cluster, with an executor killed.

A Spark master and two workers (one core, 768 MB each) are started from the pyspark
installation (``bin/spark-class``) on 127.0.0.1. The job (``cluster_job.py``) runs in its
own driver process against that master and writes an orders topic to PostgreSQL
(``onceflow-database``) and to a Kafka topic (``onceflow-kafka``). Pause points stop one
task of each query in the middle of batch 1 (the database task inside its open transaction
after writing its rows straight into the table, the Kafka task inside its open
transaction); the test then SIGKILLs the executor JVM running
each paused task (and the paused Python worker). Spark reruns the lost tasks on the
other executor, or on the executor the worker starts in place of the killed one. The
audit (``onceflow.verify``) then checks that every order is in the table and in the
``read_committed`` output topic exactly once. Every process the test started is killed at
the end, even when it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from onceflow.ports import free_port
from onceflow.proc_stat import PARENT, stat_fields
from onceflow.spark.session import java_home
from onceflow.verify.run import run_verify
from tests.kit.jvm import SHORT_LIVED_JVM_OPTIONS
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.spark.conftest import create_topic
from tests.spark.sink_helpers import make_orders

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).with_name("cluster_job.py")
ROOT = JOB.parents[2]
ORDERS = 1200  # 4 batches of maxOffsetsPerTrigger=300 per query
PAUSED_STEPS = ("database.before_task_commit", "kafka.before_task_commit")


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, command line) of a live process, None if it is gone."""
    try:
        parent = int(stat_fields(pid)[PARENT])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    return parent, cmdline


def _processes_under(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` or below it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(directory) or cwd.startswith(f"{directory}/"):
            found.append(int(entry.name))
    return found


class StandaloneCluster:
    """A Spark master and workers as subprocesses, all with their working directory in
    ``root``: that is how cleanup finds every process they started (executors, Python
    daemons and workers), even those that left their parent's process group."""

    def __init__(self, root: Path, workers: int = 2, worker_memory: str = "768m") -> None:
        self.root = root
        self.workers = workers
        self.worker_memory = worker_memory
        self.processes: list[subprocess.Popen] = []
        self.spark_home = Path(__import__("pyspark").__file__).parent
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM_OPTIONS,
        }
        home = java_home()
        if home:
            self.env["JAVA_HOME"] = home

    def _start(self, name: str, *args: str) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "w") as out:
            self.processes.append(
                subprocess.Popen(
                    [str(self.spark_home / "bin" / "spark-class"), *args],
                    cwd=self.root,
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        return log

    @staticmethod
    def _wait_for(log: Path, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists() and text in log.read_text(errors="replace"):
                return
            time.sleep(0.3)
        raise AssertionError(f"{log.name} never said {text!r}:\n{log.read_text()[-3000:]}")

    def start(self) -> StandaloneCluster:
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--webui-port", str(free_port()),
        )  # fmt: skip
        self._wait_for(master, "I have been elected leader")
        logs = []
        for n in range(self.workers):
            work = self.root / f"worker{n}"
            work.mkdir()
            args = [
                "org.apache.spark.deploy.worker.Worker", self.master_url,
                "--host", "127.0.0.1",
                "--cores", "1",
                "--memory", self.worker_memory,
                "--webui-port", str(free_port()),
                "--work-dir", str(work),
            ]  # fmt: skip
            logs.append(self._start(f"worker{n}", *args))
        for log in logs:
            self._wait_for(log, "Successfully registered with master")
        return self

    def executor_of(self, pid: int) -> int | None:
        """The executor JVM that ``pid`` (a Python worker) descends from."""
        while pid > 1:
            info = _proc_stat(pid)
            if info is None:
                return None
            parent, cmdline = info
            if "CoarseGrainedExecutorBackend" in cmdline:
                return pid
            pid = parent
        return None

    def stop(self) -> list[int]:
        """SIGKILL every process under ``root``; returns those still alive afterwards."""
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        left = _processes_under(self.root)
        while left and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
            left = _processes_under(self.root)
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        return left


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    if java_home() is None:
        pytest.skip("the Spark cluster test needs Java")
    root = tmp_path / "cluster"
    root.mkdir()
    cluster = StandaloneCluster(root)
    try:
        yield cluster.start()
    finally:
        left = cluster.stop()
        assert not left, f"processes of the cluster still alive: {left}"


def _wait_for_pauses(pause_dir: Path, job: subprocess.Popen, timeout: float) -> dict[str, int]:
    """Step -> pid of the Python worker that paused there, once every step paused."""
    deadline = time.monotonic() + timeout
    paused: dict[str, int] = {}
    while time.monotonic() < deadline and job.poll() is None:
        for step in PAUSED_STEPS:
            path = pause_dir / step
            if step not in paused and path.exists():
                paused[step] = int(path.read_text().split()[0])
        if len(paused) == len(PAUSED_STEPS):
            return paused
        time.sleep(0.1)
    raise AssertionError(f"paused steps {sorted(paused)}; job exit code {job.poll()}")


def test_both_sinks_stay_exactly_once_when_executors_are_killed(
    request, spark_cluster, txn_broker, topic, tmp_path
):
    database_url = request.getfixturevalue("postgres_url")
    bootstrap = txn_broker.bootstrap
    out = f"{topic}-out"
    make_orders(bootstrap, topic, ORDERS, partitions=4)
    create_topic(bootstrap, out, partitions=3)
    pause_dir = tmp_path / "pauses"
    pause_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_SPARK_")}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "ONCEFLOW_SPARK_PAUSE_AT": ",".join(f"{step}@1" for step in PAUSED_STEPS),
            "ONCEFLOW_SPARK_PAUSE_DIR": str(pause_dir),
            "ONCEFLOW_SPARK_PAUSE_SECONDS": "120",
        }
    )
    command = [
        sys.executable, str(JOB),
        "--master", spark_cluster.master_url,
        "--bootstrap", bootstrap,
        "--topic", topic,
        "--output-topic", out,
        "--database-url", database_url,
        "--checkpoint-dir", str(tmp_path / "checkpoints"),
        "--sink-prefix", topic,
    ]  # fmt: skip
    log = spark_cluster.root / "driver.log"
    with open(log, "w") as driver_log:
        # The driver's working directory is in the cluster's root: stop() kills it too.
        job = subprocess.Popen(
            command,
            cwd=spark_cluster.root,
            env=env,
            stdout=driver_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        paused = _wait_for_pauses(pause_dir, job, timeout=150)
        killed = set()
        for step, worker in paused.items():
            executor = spark_cluster.executor_of(worker)
            assert executor is not None, f"no executor JVM above Python worker {worker} ({step})"
            if executor not in killed:
                os.kill(executor, signal.SIGKILL)
                killed.add(executor)
            try:
                os.kill(worker, signal.SIGKILL)  # in case it outlived its JVM
            except ProcessLookupError:
                pass
        assert job.wait(180) == 0, log.read_text()[-5000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    driver_output = log.read_text()
    assert "done orders_to_database" in driver_output and "done orders_to_kafka" in driver_output
    # Spark saw the executors die under running tasks and ran those tasks again.
    assert "Lost executor" in driver_output or "ExecutorLostFailure" in driver_output

    report = run_verify(
        bootstrap, topic, id_field="order_id", key_field="store", database_url=database_url,
        table="orders_out", output_topic=out, timeout=30,
    )  # fmt: skip
    assert report.ok, report.to_json()
    assert [sink.records for sink in report.sinks] == [ORDERS, ORDERS]
