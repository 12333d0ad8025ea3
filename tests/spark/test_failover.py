"""Spark queries through both exactly-once sinks while a node of Apache Kafka's 3-node
cluster is SIGKILLed (RF=3, acks=all, min.insync.replicas=2).

The query (tests/spark/sink_job.py, a subprocess with its own SparkSession) stops one
task of micro-batch 1 at a pause point, inside its open transaction: the Kafka sink's
task has produced its rows and its marker, the database sink's direct task has written
its rows and not committed. The test then SIGKILLs a node — the leader of the output
topic's partition, the node coordinating that task's transactional id, or the leader of
the input partition the task reads — and the task goes on against a cluster that is
electing a new leader. After the query has read everything, the node comes back
(``cluster.heal()``) and ``onceflow verify`` audits the output against the input: every
order exactly once, nothing aborted visible to read_committed, order per key kept.

`make test` runs the two leader kills once; the coordinator kill runs only in `make
stress` (ONCEFLOW_STRESS=1), which runs each kill ``ONCEFLOW_SPARK_FAILOVER_ROUNDS`` times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from onceflow.verify.run import run_verify
from tests.spark.conftest import create_topic
from tests.spark.sink_helpers import assert_append_and_accumulate_exact, make_orders
from tests.spark.test_sink_chaos import JOB, ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORDERS = 160  # 4 batches of maxOffsetsPerTrigger=40 over 2 input partitions
ROUNDS = range(int(os.environ.get("ONCEFLOW_SPARK_FAILOVER_ROUNDS", "1")))
# How long the paused task waits after the kill before it goes on (the node's death is
# noticed by the clients; its partitions move after broker.session.timeout.ms, 6 s).
PAUSE_SECONDS = "2"
# A ceiling, not a pace: on two loaded cores a Spark job takes minutes to reach batch 1.
JOB_TIMEOUT = 600


@pytest.fixture
def cluster(apache_kafka_cluster):
    """The session's cluster, all three nodes up before and after the test."""
    apache_kafka_cluster.heal()
    yield apache_kafka_cluster
    apache_kafka_cluster.heal()


@dataclass(frozen=True)
class Pause:
    """Where the query stopped: the task's micro-batch and task partition."""

    batch_id: int
    partition: int


def run_with_kill(tmp_path: Path, step: str, kill, *args: str) -> tuple[Pause, int]:
    """Run the job with ``step`` armed as a pause point; when a task stops there, call
    ``kill(pause)`` (it SIGKILLs a node and returns its id); the job must then finish."""
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_SPARK_")}
    env |= {
        "ONCEFLOW_SPARK_PAUSE_AT": step,
        "ONCEFLOW_SPARK_PAUSE_DIR": str(pauses),
        "ONCEFLOW_SPARK_PAUSE_SECONDS": PAUSE_SECONDS,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)])),
    }
    log = (tmp_path / "job.log").open("w")
    job = subprocess.Popen(
        [sys.executable, str(JOB), *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: killed whole if the test fails
    )
    try:
        paused = pauses / step.partition("@")[0]
        deadline = time.monotonic() + JOB_TIMEOUT
        while not paused.exists():
            assert job.poll() is None, f"the job ended before {step}: {tail(tmp_path)}"
            assert time.monotonic() < deadline, f"the job never reached {step}"
            time.sleep(0.05)
        _pid, batch_id, partition = paused.read_text().split()
        pause = Pause(int(batch_id), int(partition))
        killed = kill(pause)
        assert job.wait(JOB_TIMEOUT) == 0, tail(tmp_path)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        log.close()
    return pause, killed


def tail(tmp_path: Path) -> str:
    return (tmp_path / "job.log").read_text(errors="replace")[-3000:]


def job_args(bootstrap: str, topic: str, tmp_path: Path, sink_id: str) -> list[str]:
    return [
        "--bootstrap", bootstrap, "--topic", topic, "--checkpoint", str(tmp_path / "cp"),
        "--sink-id", sink_id,
    ]  # fmt: skip


def kafka_sink_with_kill(cluster, topic: str, tmp_path: Path, victim: str) -> tuple[int, int]:
    """The Kafka sink into a one-partition output topic; ``victim``: "leader" (of the
    output partition) or "coordinator" (of the paused task's transactional id)."""
    bootstrap = cluster.bootstrap
    out = f"{topic}-out"
    create_topic(bootstrap, out, partitions=1)
    make_orders(bootstrap, topic, ORDERS)
    sink_id = f"{topic}-confirm"

    def kill(pause: Pause) -> int:
        if victim == "leader":
            node = cluster.leader_of(out, 0)
        else:
            node = cluster.coordinator_of(transactional_id=f"onceflow-{sink_id}-{pause.partition}")
        cluster.kill(node)
        return node

    args = [*job_args(bootstrap, topic, tmp_path, sink_id), "--output-topic", out]
    _pause, killed = run_with_kill(tmp_path, "kafka.before_task_commit@1", kill, *args)
    if victim == "leader":
        assert cluster.leader_of(out, 0) not in (killed, -1)
    cluster.heal()
    cluster.wait_in_sync(out)
    report = run_verify(
        bootstrap, topic, id_field="order_id", key_field="store", output_topic=out, timeout=30
    )
    assert report.ok, report.to_json()
    assert report.sinks[0].records == ORDERS
    return killed, report.sinks[0].records


@pytest.mark.parametrize("round", ROUNDS)
def test_kafka_sink_output_leader_killed_mid_transaction(cluster, topic, tmp_path, round):
    kafka_sink_with_kill(cluster, topic, tmp_path, "leader")


@pytest.mark.skipif(
    not os.environ.get("ONCEFLOW_STRESS"), reason="in make stress (ONCEFLOW_STRESS=1)"
)
@pytest.mark.parametrize("round", ROUNDS)
def test_kafka_sink_transaction_coordinator_killed_mid_transaction(cluster, topic, tmp_path, round):
    kafka_sink_with_kill(cluster, topic, tmp_path, "coordinator")


@pytest.mark.parametrize("round", ROUNDS)
def test_database_sink_input_leader_killed_mid_batch(cluster, topic, tmp_path, round):
    """The direct database sink (sqlite, append and accumulate queries) while the leader
    of the input partition its paused task reads dies: the next batches read from the new
    leader, and the offsets in the database keep the output exact."""
    bootstrap = cluster.bootstrap
    url = f"sqlite:///{tmp_path / 'out.db'}"
    orders = make_orders(bootstrap, topic, ORDERS)

    def kill(pause: Pause) -> int:
        node = cluster.leader_of(topic, pause.partition)
        cluster.kill(node)
        return node

    args = job_args(bootstrap, topic, tmp_path, "orders")
    args += ["--database-url", url, "--strategy", "direct", "--mode", "append,accumulate"]
    pause, killed = run_with_kill(tmp_path, "database.before_task_commit@1", kill, *args)
    assert cluster.leader_of(topic, pause.partition) not in (killed, -1)
    cluster.heal()
    cluster.wait_in_sync(topic)
    assert len(orders) == ORDERS
    assert_append_and_accumulate_exact(bootstrap, topic, url, orders)
