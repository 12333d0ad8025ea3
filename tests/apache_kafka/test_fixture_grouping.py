"""Under ``-n 2 --dist loadgroup`` every test using ``apache_kafka_cluster`` runs on one
worker, whatever xdist groups its module or the test itself already carry; a module marked
``apache_kafka_group("b")`` runs its cluster tests in a group of their own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CONFTEST = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.fixture(scope="session")
    def apache_kafka_cluster():  # stands in for the real cluster: only grouping is tested
        return "cluster"

    @pytest.fixture
    def record(request):
        def write(kind):
            worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
            with open(os.environ["WORKERS_FILE"], "a") as file:
                file.write(f"{kind} {worker} {request.node.nodeid}\\n")
        return write
    """
)

GROUPED_MODULE = textwrap.dedent(
    """
    import time
    import pytest

    pytestmark = pytest.mark.xdist_group("module-group")

    @pytest.mark.parametrize("n", range(4))
    def test_cluster(n, apache_kafka_cluster, record):
        time.sleep(0.2)
        record("cluster")

    @pytest.mark.parametrize("n", range(4))
    def test_plain(n, record):
        time.sleep(0.2)
        record("plain")
    """
)

OTHER_MODULE = textwrap.dedent(
    """
    import time
    import pytest

    @pytest.mark.xdist_group("own-group")
    @pytest.mark.parametrize("n", range(4))
    def test_cluster_with_own_group(n, apache_kafka_cluster, record):
        time.sleep(0.2)
        record("cluster")

    @pytest.mark.parametrize("n", range(8))
    def test_cluster_ungrouped(n, apache_kafka_cluster, record):
        time.sleep(0.2)
        record("cluster")

    @pytest.mark.parametrize("n", range(8))
    def test_plain(n, record):
        time.sleep(0.2)
        record("plain")
    """
)


SECOND_CLUSTER_MODULE = textwrap.dedent(
    """
    import time
    import pytest

    pytestmark = pytest.mark.apache_kafka_group("b")

    @pytest.mark.parametrize("n", range(4))
    def test_cluster(n, apache_kafka_cluster, record):
        time.sleep(0.2)
        record("cluster-b")
    """
)


def test_every_apache_kafka_test_runs_on_one_worker(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_grouped.py").write_text(GROUPED_MODULE)
    (project / "test_other.py").write_text(OTHER_MODULE)
    (project / "test_second_cluster.py").write_text(SECOND_CLUSTER_MODULE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "WORKERS_FILE": str(tmp_path / "workers.txt")},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line.split() for line in (tmp_path / "workers.txt").read_text().splitlines()]
    cluster_workers = {worker for kind, worker, _ in lines if kind == "cluster"}
    assert len([line for line in lines if line[0] == "cluster"]) == 16
    assert len(cluster_workers) == 1, lines
    assert all(node.endswith("@apache-kafka") for kind, _, node in lines if kind == "cluster")
    second = [(worker, node) for kind, worker, node in lines if kind == "cluster-b"]
    assert len(second) == 4 and len({worker for worker, _ in second}) == 1, lines
    assert all(node.endswith("@apache-kafka-b") for _, node in second)
    assert {worker for _, worker, _ in lines} == {"gw0", "gw1"}  # the rest still spreads


STOPPING_CONFTEST = textwrap.dedent(
    """
    import contextlib
    import os
    import pytest
    import onceflow.testing

    def log(line):
        with open(os.environ["EVENTS_FILE"], "a") as file:
            file.write(line + "\\n")

    class Cluster:  # the calls the plugin makes on a KafkaCluster, logged
        def __init__(self):
            self.nodes = {1: "node", 2: "node", 3: "node"}
            self.up = set(self.nodes)
        def running_nodes(self):
            return sorted(self.up)
        def kill(self, node_id):
            self.up.discard(node_id)
            log(f"kill {node_id}")
        def heal(self):
            self.up = set(self.nodes)
            log("heal")

    CLUSTER = Cluster()

    @contextlib.contextmanager
    def running(directory):
        log("start")
        yield CLUSTER
        log("stop")

    onceflow.testing.running_apache_kafka_cluster = running

    @pytest.fixture
    def record(request):
        return lambda kind: log(f"{kind} {len(CLUSTER.up)}")
    """
)

STOPPING_MODULE = textwrap.dedent(
    """
    import pytest

    @pytest.mark.parametrize("n", range(3))
    def test_cluster(n, apache_kafka_cluster, record):
        record("cluster")

    @pytest.mark.parametrize("n", range(2))
    def test_plain(n, record):
        record("plain")
    """
)

STOPPING_SECOND_MODULE = textwrap.dedent(
    """
    import pytest

    pytestmark = pytest.mark.apache_kafka_group("b")

    @pytest.mark.parametrize("n", range(2))
    def test_cluster(n, apache_kafka_cluster, record):
        record("cluster-b")
    """
)


def test_a_worker_stops_the_cluster_after_its_group_and_starts_it_for_the_next(tmp_path):
    """One worker (xdist runs the groups first): group apache-kafka's three tests, its
    nodes stopped after the last; group b's tests on the same session cluster, healed
    before the first and stopped after the last; the plain tests with the nodes down."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(STOPPING_CONFTEST)
    (project / "test_first.py").write_text(STOPPING_MODULE)
    (project / "test_second.py").write_text(STOPPING_SECOND_MODULE)
    events = tmp_path / "events.txt"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "EVENTS_FILE": str(events)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert events.read_text().splitlines() == [
        "start", "cluster 3", "cluster 3", "cluster 3", "kill 1", "kill 2", "kill 3",
        "heal", "cluster-b 3", "cluster-b 3", "kill 1", "kill 2", "kill 3",
        "plain 0", "plain 0", "stop",
    ]  # fmt: skip
