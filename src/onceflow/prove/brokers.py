"""Where a trial runs: a fresh embedded broker of its own, or a cluster prove was given.

The embedded broker is new for every trial (no group, topic, producer id or transaction
of one trial is seen by the next) and runs with ``onceflow.group.leave.on.disconnect``, so
a SIGKILLed ``subscribe()`` consumer leaves its group at once and its restarted twin gets
its partitions without waiting out ``session.timeout.ms`` (docs/groups.md). Each worker
has a listener of its own, so the broker's request traps know whose request they hold;
with network faults each worker reaches its listener through a proxy of its own, which
connects from an address of its own (the group members show whose they are); with
power-loss faults the broker journals its fsyncs.

A cluster (``--bootstrap``, ``--kafka-cluster`` or a ``KafkaCluster`` from a test) is
shared by the trials: each deletes the pipeline's topics and groups and creates the topics
again; a group still holding a dead member is waited for (its session timeout) before it
can be deleted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from onceflow.broker.process import BrokerProcess
from onceflow.client_errors import worth_retrying
from onceflow.faults.actions import FaultActions
from onceflow.faults.failover import healthy
from onceflow.faults.probe import groups_committed_on
from onceflow.faults.schedule import NETWORK_ACTIONS, POWER_LOSS, Schedule
from onceflow.faults.traps import TRAPS_ENV, TrapControl
from onceflow.log.durability import JOURNAL_ENV
from onceflow.ports import free_ports
from onceflow.prove.errors import ProveError, ProveFailure
from onceflow.prove.options import ProofOptions
from onceflow.tcp_proxy import TcpProxy

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

LEAVE_ON_DISCONNECT = {"onceflow.group.leave.on.disconnect": "true"}
# Kafka's default session.timeout.ms is 45 s; a group caught rebalancing waits longer
GROUP_EMPTY_TIMEOUT_S = 120.0  # then the group stays (its offsets go with the topics)
RESET_RETRY_S = 60.0  # retriable errors while resetting (NOT_COORDINATOR after a failover)


@dataclass
class TrialCluster:
    """What one trial talks to: prove's own clients use ``bootstrap``; worker N uses
    ``worker_bootstrap[N]`` (a proxy) or ``bootstrap``."""

    bootstrap: str
    kafka: KafkaCluster | None = None  # an Apache Kafka cluster whose nodes prove controls
    traps: TrapControl | None = None  # the embedded broker's request traps
    worker_bootstrap: dict[int, str] = field(default_factory=dict)
    replication: int = 1
    topic_config: dict[str, str] = field(default_factory=dict)

    def for_worker(self, worker: int) -> str:
        return self.worker_bootstrap.get(worker, self.bootstrap)


@contextmanager
def embedded_broker(
    directory: Path, schedule: Schedule, workers: int, actions: FaultActions
) -> Iterator[TrialCluster]:
    """A fresh broker for one trial, killed (nothing of it is kept) when the block ends.
    Listener PROVE serves prove's own clients, W<n> worker n (its request traps); with
    network faults worker n reaches W<n> through a proxy of its own."""
    kinds = {fault.action for fault in schedule}
    proxied = bool(kinds & set(NETWORK_ACTIONS))
    ports = free_ports(1 + workers * (2 if proxied else 1))
    names = ["PROVE", *(f"W{n}" for n in range(1, workers + 1))]
    advertised = [f"127.0.0.1:{port}" for port in ports[: workers + 1]]
    if proxied:  # worker n is told its proxy's port
        advertised[1:] = [f"127.0.0.1:{port}" for port in ports[workers + 1 :]]
    config = {
        **LEAVE_ON_DISCONNECT,
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in zip(names, ports, strict=False)),
        "advertised.listeners": ",".join(f"{n}://{a}" for n, a in zip(names, advertised,
                                                                        strict=True)),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
    }  # fmt: skip
    traps = directory / "traps"
    env = {TRAPS_ENV: str(traps)}
    if POWER_LOSS in kinds:
        actions.journal = directory / "fsync-journal"
        env[JOURNAL_ENV] = str(actions.journal)
    broker = BrokerProcess(directory / "broker", config=config, log_path=directory / "broker.log",
                           env=env)  # fmt: skip
    actions.broker = broker
    with contextlib.ExitStack() as stack:
        stack.callback(broker.kill)
        try:
            broker.start()
        except RuntimeError as error:
            raise ProveFailure(f"the embedded broker did not start: {error}") from None
        cluster = TrialCluster(f"127.0.0.1:{ports[0]}", traps=TrapControl(traps, workers))
        actions.bootstrap = cluster.bootstrap
        for n in range(1, workers + 1):
            cluster.worker_bootstrap[n] = advertised[n]
            if proxied:
                proxy = TcpProxy(("127.0.0.1", ports[workers + n]), ("127.0.0.1", ports[n]),
                                 source=worker_host(n))  # fmt: skip
                actions.proxies[n] = stack.enter_context(proxy)
        yield cluster


def worker_host(worker: int) -> str:
    """The loopback address worker N's proxy connects from: the host its group members
    show (a fault engine tells them apart by it)."""
    return f"127.0.0.{10 + worker}"


def shared_cluster(
    options: ProofOptions, work: Path, stack: contextlib.ExitStack
) -> Callable[[], TrialCluster] | None:
    """What every trial shares (None: an embedded broker per trial): a KafkaCluster given
    or started (its nodes can be killed), or any cluster at ``--bootstrap``."""
    kafka = options.cluster
    if kafka is None and options.kafka_cluster:
        from onceflow.kafka_cluster import KafkaCluster, KafkaClusterError

        try:
            kafka = stack.enter_context(
                KafkaCluster(3, directory=work / "apache-kafka", replication_proxies=True)
            )
        except KafkaClusterError as error:
            raise ProveFailure(f"cannot start the Apache Kafka cluster: {error}") from None
    if kafka is not None:
        cluster = kafka

        def healed() -> TrialCluster:
            healthy(cluster)
            return TrialCluster(cluster.bootstrap, cluster, replication=3,
                                topic_config={"min.insync.replicas": "2"})  # fmt: skip

        return healed
    if options.bootstrap:
        bootstrap = options.bootstrap
        return lambda: TrialCluster(bootstrap)
    return None


def reset(cluster: TrialCluster, topics: list[str]) -> None:
    """Delete the pipeline's topics and the groups with offsets on them, so that the trial
    starts from empty topics and no committed offsets. A group a dead member of the last
    trial still holds (its session, or a rebalance, has not timed out) is left: Kafka drops
    a group's offsets of a deleted topic's partitions with the topic."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    bootstrap = cluster.bootstrap
    deadline = time.monotonic() + RESET_RETRY_S
    while True:
        # a client of its own each time: one that cached a coordinator or a leader of
        # before the last trial's node fault kept asking it (NOT_COORDINATOR for a minute)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        try:
            existing = admin.list_topics(timeout=10).topics
            doomed = [t for t in topics if t in existing]
            if not doomed:
                return
            for group in groups_committed_on(bootstrap, doomed):
                _delete_group(bootstrap, group)
            for future in admin.delete_topics(doomed).values():
                future.result(30)
            break
        except KafkaException as error:
            # a coordinator still moving after the last trial's node fault: ask again
            if worth_retrying(error) and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            raise ProveFailure(f"cannot reset the pipeline's topics and groups on "
                               f"{bootstrap}: {error.args[0]} (is the cluster up, and may "
                               "this client delete topics and groups?)") from None  # fmt: skip
    deadline = time.monotonic() + 30
    while set(doomed) & set(admin.list_topics(timeout=10).topics):
        if time.monotonic() > deadline:
            raise ProveFailure(f"topics {doomed} were not deleted within 30 s on {bootstrap}")
        time.sleep(0.2)
    if cluster.kafka is not None:  # one node forgetting a topic is not all of them
        for name in doomed:
            cluster.kafka.wait_for_topic_gone(name)


def _delete_group(bootstrap: str, group: str) -> None:
    """Delete ``group``; while a dead member of the last trial is still in it (its session
    has not expired), or its coordinator is moving, wait a while, then leave it."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + GROUP_EMPTY_TIMEOUT_S
    while True:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})  # as reset's
        try:
            admin.delete_consumer_groups([group])[group].result(30)
            return
        except KafkaException as error:
            code = error.args[0].code()
            if code == KafkaError.GROUP_ID_NOT_FOUND:
                return
            occupied = code == KafkaError.NON_EMPTY_GROUP
            if occupied and time.monotonic() > deadline:
                return
            if not (occupied or worth_retrying(error)) or time.monotonic() > deadline:
                raise  # e.g. a coordinator still loading for longer than the deadline
        time.sleep(1.0)


def create_topics(cluster: TrialCluster, names: list[str], partitions: int,
                  topics_file: Path | None, inputs: int = 1) -> None:  # fmt: skip
    """Make the trial's topics (the first ``inputs`` of ``names`` its input topics)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    if topics_file is not None:
        from onceflow.topics import migrate

        try:
            migrate(str(topics_file), cluster.bootstrap)
        except Exception as error:  # SpecError, PlanError, TopicsError: one line each
            raise ProveError(f"{topics_file}: {error}") from None
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    config = dict(cluster.topic_config)
    # Every topic is asked for and the controller says which exist: a broker's metadata
    # can still show a topic the last trial's reset deleted.
    wanted = []
    for index, name in enumerate(names):
        placed = _placement(cluster, partitions, shift=0 if index < inputs else 1)
        wanted.append(
            NewTopic(name, len(placed), -1, replica_assignment=placed, config=config) if placed
            else NewTopic(name, partitions, cluster.replication, config=config)
        )  # fmt: skip
    for name, future in admin.create_topics(wanted).items():
        try:
            future.result(30)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # made by the topics file
            raise ProveFailure(f"cannot create topic {name!r}: {error.args[0]}") from None
    if cluster.kafka is not None:
        for name in names:  # every node knows them before the pipeline asks
            cluster.kafka.wait_for_topic(name)


def _placement(cluster: TrialCluster, partitions: int, shift: int) -> list[list[int]] | None:
    """On an Apache Kafka cluster prove controls, partition N of an input topic is led by
    the N-th node and an output topic's by the next one (``shift`` 1), its leader first: a
    leader fault cuts off the followers of an output partition's leader and kills it while
    the input partition of the same number (which a copier, or any pipeline keeping the
    key's partition, reads it from) has another leader and goes on taking input."""
    if cluster.kafka is None or cluster.replication < 2:
        return None
    nodes = sorted(cluster.kafka.running_nodes())
    replicas = min(cluster.replication, len(nodes))
    return [[nodes[(p + shift + r) % len(nodes)] for r in range(replicas)]
            for p in range(partitions)]  # fmt: skip
