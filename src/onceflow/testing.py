"""pytest plugin: a real onceflow broker for your tests, in the test process or as a child.

Installed with onceflow and enabled automatically; it does what testcontainers'
``KafkaContainer`` does, without Docker or Java. Fixtures:

* ``kafka_session_broker`` — one broker for the whole test session; ``kafka_module_broker``
  — one per test module, with the settings a module's own ``kafka_module_broker_config``
  fixture returns (none by default). Share them between tests by giving each test its own
  topics: ``kafka_topic_factory``.
* ``kafka_topic_factory`` — ``kafka_topic_factory(partitions=3)`` creates a topic with a
  unique name (from the test's name) on the session broker, or on ``broker=``, and
  returns the name.
* ``kafka_broker`` — a fresh broker for one test (for settings of its own, or a clean
  restart); ``kafka_broker_factory(config={"num.partitions": "3"})`` starts brokers with
  settings.
* ``kafka_broker_process`` — a fresh broker as a child process, for tests that kill it
  (SIGKILL, then ``start()`` again on the same data directory and port), signal it or give
  it an environment of its own; ``kafka_broker_factory(..., process=True)`` likewise.

All but the last are an ``InProcessBroker``: the broker on an event loop thread of the
test process, started in milliseconds, reached over 127.0.0.1 by real clients like any
broker. It cannot be killed (``kill()`` raises); a ``BrokerProcess`` can.

Apache Kafka itself (the release ``onceflow.kafka_cluster`` pins, from Maven's jars):

* ``apache_kafka_cluster`` — one 3-node KRaft cluster for the session
  (``onceflow.kafka_cluster.KafkaCluster``; ``.bootstrap`` lists all three brokers).
  Every test using it runs on one pytest-xdist worker: the plugin puts it in the
  xdist group ``"apache-kafka"`` (``make test`` runs ``--dist loadgroup``), so the
  session starts three JVMs once, not once per worker, and a test may kill nodes without
  disturbing a test on another worker. After the group's last test the worker stops the
  cluster (an idle one keeps about 7% of a core busy) and starts it again, on its data, if
  one of its later tests uses it. A test that kills or stops nodes brings them back
  (``cluster.heal()``) before it ends; ``apache_kafka_topic_factory`` heals too. A module
  marked ``pytest.mark.apache_kafka_group("NAME")`` goes into group ``"apache-kafka-NAME"``
  instead: it gets a worker and a cluster of its own, so that long cluster tests of
  different modules run side by side (a module-scoped ``apache_kafka_cluster`` of its
  own, from ``running_apache_kafka_cluster``, stops that cluster when the module ends).
* ``apache_kafka_topic_factory`` — like ``kafka_topic_factory`` on that cluster, with
  replication factor 3 by default.

``prove(...)`` runs ``onceflow prove`` from a test (docs/prove.md)::

    def test_orders_pipeline_is_exactly_once():
        proof = prove("runner", handler="orders:handle", config=Path("runner.toml"), quick=True)
        assert proof.held, proof.verdict()

Every broker listens on a free port with a temporary data directory;
``broker.bootstrap`` is ``"127.0.0.1:PORT"``. A broker that refuses to start raises
``BrokerStartError`` quoting its own message (e.g. an unknown setting).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from onceflow.broker.in_process import InProcessBroker, InProcessBrokerError
from onceflow.broker.process import BrokerProcess, temporary_broker

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster
    from onceflow.prove import Proof

__all__ = [
    "APACHE_KAFKA_GROUP",
    "BrokerProcess",
    "BrokerStartError",
    "InProcessBroker",
    "PluginBroker",
    "apache_kafka_cluster",
    "apache_kafka_topic_factory",
    "kafka_broker",
    "kafka_broker_factory",
    "kafka_broker_process",
    "kafka_module_broker",
    "kafka_module_broker_config",
    "kafka_session_broker",
    "kafka_topic_factory",
    "prove",
    "start_broker",
    "temporary_broker",
    "unique_name",
]


def prove(mode: str = "runner", **options: object) -> Proof:
    """``onceflow prove MODE``: the keyword arguments are ``ProofOptions``' fields
    (``handler``, ``config``, ``command``, ``outputs``, ``seed``, ``kills``, ``quick``,
    ...). Returns the ``Proof``; raises ``ProveError`` on bad input."""
    from onceflow.prove import ProofOptions, run_proof

    return run_proof(ProofOptions(mode=mode, **options))  # type: ignore[arg-type]


# What the broker fixtures give: in the test process, or a child process to kill.
PluginBroker = InProcessBroker | BrokerProcess
B = TypeVar("B", InProcessBroker, BrokerProcess)


class BrokerStartError(RuntimeError):
    """The broker refused to start, exited or never said it was ready."""


def start_broker(broker: B, timeout: float = 30.0) -> B:
    """``broker.start()``, failing with the broker's own last error line."""
    if isinstance(broker, InProcessBroker):
        try:
            return broker.start(timeout)
        except InProcessBrokerError as error:
            raise BrokerStartError(f"broker did not start: {error}") from None
    log = broker.log_path
    offset = log.stat().st_size if log.exists() else 0
    try:
        return broker.start(timeout)
    except RuntimeError:
        raise BrokerStartError(
            f"broker did not start: {_last_error(log, offset)} (full log: {log})"
        ) from None


def _last_error(log: Path, offset: int) -> str:
    try:
        with open(log, errors="replace") as file:
            file.seek(offset)
            lines = [line.strip() for line in file if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if line.startswith("Error: ")]
    if errors:
        return errors[-1].removeprefix("Error: ")
    return lines[-1] if lines else "it exited without a message"


def unique_name(hint: str = "topic") -> str:
    """A topic or group name no other test uses: the hint (e.g. the test's name) + random."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-.")[:100] or "topic"
    return f"{cleaned}-{uuid.uuid4().hex[:8]}"


def _shared_broker(
    factory: pytest.TempPathFactory, name: str, config: dict[str, str] | None = None
) -> Iterator[InProcessBroker]:
    broker = start_broker(InProcessBroker(factory.mktemp(name) / "data", config=config))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    yield from _shared_broker(tmp_path_factory, "kafka-session")


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    """The settings of ``kafka_module_broker``: none; a module overrides this fixture
    (same name, module scope) to give its broker settings of its own."""
    return {}


@pytest.fixture(scope="module")
def kafka_module_broker(
    tmp_path_factory: pytest.TempPathFactory, kafka_module_broker_config: dict[str, str]
) -> Iterator[InProcessBroker]:
    yield from _shared_broker(tmp_path_factory, "kafka-module", kafka_module_broker_config)


@pytest.fixture
def kafka_topic_factory(request: pytest.FixtureRequest) -> Callable[..., str]:
    def create(
        partitions: int = 1,
        config: dict[str, str] | None = None,
        broker: PluginBroker | None = None,
        name: str | None = None,
    ) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        target = broker or request.getfixturevalue("kafka_session_broker")
        topic = name or unique_name(request.node.name)
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        new = NewTopic(topic, partitions, 1, config=dict(config or {}))
        admin.create_topics([new])[topic].result(30)
        return topic

    return create


@pytest.fixture
def kafka_broker_factory(tmp_path: Path) -> Iterator[Callable[..., PluginBroker]]:
    """``start(config=None, name="broker", process=False, **options)``: a broker in this
    process, or with ``process=True`` a ``BrokerProcess`` (``options`` are its ``env``,
    ``args``, ...), stopped when the test ends."""
    brokers: list[PluginBroker] = []

    def start(
        config: dict[str, str] | None = None,
        name: str = "broker",
        process: bool = False,
        **options: object,
    ) -> PluginBroker:
        data_dir = tmp_path / f"{name}{len(brokers)}"
        broker: PluginBroker
        if process:
            broker = BrokerProcess(data_dir, config=config, **options)  # type: ignore[arg-type]
        else:
            broker = InProcessBroker(data_dir, config=config, **options)  # type: ignore[arg-type]
        brokers.append(broker)
        return start_broker(broker)

    yield start
    for broker in brokers:
        broker.stop()


@pytest.fixture
def kafka_broker(kafka_broker_factory: Callable[..., InProcessBroker]) -> InProcessBroker:
    return kafka_broker_factory()


@pytest.fixture
def kafka_broker_process(kafka_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return kafka_broker_factory(process=True)


# --------------------------------------------------------------------------- Apache Kafka

APACHE_KAFKA_GROUP = "apache-kafka"
CLUSTER_GROUP_MARK = "apache_kafka_group"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{CLUSTER_GROUP_MARK}(name): the module's Apache Kafka tests share a cluster and an "
        "xdist worker of their own (group apache-kafka-NAME)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, every test using the Apache Kafka cluster joins the one
    group ``"apache-kafka"`` (or ``"apache-kafka-NAME"``, marked ``apache_kafka_group``),
    so one xdist worker runs them all (and starts one cluster).

    pytest-xdist names an item's group after all its ``xdist_group`` marks (module's and
    test's, joined) by suffixing its node id; this hook runs after that and replaces the
    suffix, so a module's own group cannot split the Apache Kafka tests over workers. A
    test that reaches the cluster only through ``request.getfixturevalue`` needs
    ``pytest.mark.xdist_group("apache-kafka")`` instead.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        uses = "apache_kafka_cluster" in getattr(item, "fixturenames", ())
        if not uses and APACHE_KAFKA_GROUP not in names:
            continue
        own = item.get_closest_marker(CLUSTER_GROUP_MARK)
        group = f"{APACHE_KAFKA_GROUP}-{own.args[0]}" if own is not None else APACHE_KAFKA_GROUP
        suffix = "@" + "_".join(sorted(names)) if names else ""
        base = item.nodeid.removesuffix(suffix) if suffix else item.nodeid
        item._nodeid = f"{base}@{group}"  # type: ignore[attr-defined]


@contextmanager
def running_apache_kafka_cluster(
    directory: Path, *, replication_proxies: bool = False
) -> Iterator[KafkaCluster]:
    """A 3-node Apache Kafka cluster in ``directory`` while the block runs, killed after it;
    a cluster that cannot start fails the test with its message. ``replication_proxies``:
    one whose leaders' followers a fault can cut off (prove's leader faults)."""
    from onceflow.kafka_cluster import KafkaCluster, KafkaClusterError

    # The nodes stand for machines of their own: on this shared machine the tests' Spark
    # jobs must not starve their controllers (a new active controller whose events took
    # 4-10 s fenced a live broker and resigned, leaving partitions without a leader).
    cluster = KafkaCluster(
        3, directory=directory, replication_proxies=replication_proxies, niceness=-5
    )
    try:
        cluster.start()
    except KafkaClusterError as error:
        pytest.fail(f"Apache Kafka cluster: {error}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop(graceful=False)


_SESSION_CLUSTER = pytest.StashKey["KafkaCluster"]()


@pytest.fixture(scope="session")
def apache_kafka_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    with running_apache_kafka_cluster(tmp_path_factory.mktemp("apache-kafka")) as cluster:
        request.config.stash[_SESSION_CLUSTER] = cluster
        try:
            yield cluster
        finally:
            del request.config.stash[_SESSION_CLUSTER]


def _cluster_group(item: pytest.Item) -> str | None:
    """The Apache Kafka xdist group the item is in (its node id's suffix), if any."""
    group = item.nodeid.rpartition("@")[2] if "@" in item.nodeid else ""
    if group == APACHE_KAFKA_GROUP or group.startswith(f"{APACHE_KAFKA_GROUP}-"):
        return group
    return None


_STOPPED_AFTER_GROUP = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Under ``--dist loadgroup`` a worker gets an Apache Kafka group's tests in one go;
    after the last of them the session's cluster stops (an idle cluster keeps about 7% of
    a core busy), keeping its data. A later test of this worker that uses it starts it
    again (``pytest_runtest_setup``)."""
    cluster = item.config.stash.get(_SESSION_CLUSTER, None)
    if cluster is None or nextitem is None or not getattr(item.config.option, "loadgroup", False):
        return
    group = _cluster_group(item)
    if group is not None and _cluster_group(nextitem) != group:
        for node_id in cluster.running_nodes():
            cluster.kill(node_id)
        item.config.stash[_STOPPED_AFTER_GROUP] = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    cluster = item.config.stash.get(_SESSION_CLUSTER, None)
    if cluster is None or not item.config.stash.get(_STOPPED_AFTER_GROUP, False):
        return
    if _cluster_group(item) is not None or "apache_kafka_cluster" in getattr(
        item, "fixturenames", ()
    ):
        item.config.stash[_STOPPED_AFTER_GROUP] = False
        cluster.heal()


@pytest.fixture
def apache_kafka_topic_factory(request: pytest.FixtureRequest) -> Callable[..., str]:
    def create(
        partitions: int = 1,
        replication_factor: int = 3,
        config: dict[str, str] | None = None,
        name: str | None = None,
    ) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        cluster = request.getfixturevalue("apache_kafka_cluster")
        cluster.heal()
        topic = name or unique_name(request.node.name)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        new = NewTopic(topic, partitions, replication_factor, config=dict(config or {}))
        admin.create_topics([new])[topic].result(30)
        cluster.wait_for_topic(topic)
        return topic

    return create
