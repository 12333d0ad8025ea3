"""A KRaft cluster of combined broker+controller nodes on loopback, from Maven's jars.

    with KafkaCluster(nodes=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        cluster.kill(cluster.leader_of("orders", 0))

Node ids are 1..nodes. Every node listens on ``127.0.0.1`` with a broker port and a
controller port; the controller quorum is static (``controller.quorum.voters``) and every
node is a voter. With ``replication_proxies=True`` the nodes replicate through a listener
of their own that each node advertises behind a TCP proxy: ``cut_replication(node)``
cuts the node's followers off from it while clients, controllers and the node itself go
on (a leader that acknowledges what its followers cannot copy). The settings suit tests
of exactly-once pipelines: replication factor 3 and ``min.insync.replicas=2`` by default
(1 and 1 for a single node), small internal topics, fast failure detection. Nothing here
needs more than the standard library and confluent-kafka (for the metadata checks).
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from onceflow.kafka_cluster import jars
from onceflow.kafka_cluster.class_archive import existing_archive
from onceflow.kafka_cluster.errors import KafkaClusterError
from onceflow.kafka_cluster.node import DEFAULT_HEAP, FAST_START_OPTIONS, KafkaNode, find_java
from onceflow.kafka_cluster.probe import (
    coordinator_partition,
    node_metadata,
    quorum,
    wait_for_every_node,
)
from onceflow.kafka_cluster.secured import LISTENER as SECURED
from onceflow.kafka_cluster.secured import SecuredListener
from onceflow.kafka_cluster.settings import default_properties
from onceflow.ports import free_ports, is_free
from onceflow.tcp_proxy import TcpProxy

START_TIMEOUT = 120.0
REPLICATION = "REPLICATION"  # the inter-broker listener behind a proxy (replication_proxies)
# Nodes stopping together can wait on a controller quorum that is going away: SIGKILL then.
GRACEFUL_STOP_SECONDS = 10.0


class KafkaCluster:
    """Apache Kafka nodes on loopback; ``start()`` returns once every node serves Metadata
    listing every broker. Kill, terminate and restart single nodes to test failover."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        directory: Path | str | None = None,
        port: int = 0,
        config: Mapping[str, str] | None = None,
        heap: str = DEFAULT_HEAP,
        jvm_options: Sequence[str] = FAST_START_OPTIONS,
        java: str | None = None,
        start_timeout: float = START_TIMEOUT,
        class_archive: bool = True,
        secured: SecuredListener | None = None,
        replication_proxies: bool = False,
        niceness: int = 0,
    ) -> None:
        """``directory`` keeps the nodes' data (a temporary one is deleted by ``stop``);
        ``port`` is node 1's broker port, node N gets ``port + N - 1`` (0: free ports);
        ``config`` overrides broker settings on every node; ``class_archive``: use the
        class-data archive of Kafka's classes when one was made (class_archive.py);
        ``secured``: a SASL_SSL listener on every node too, with ACLs (secured.py);
        ``replication_proxies``: the nodes replicate through proxies ``cut_replication``
        can cut; ``niceness``: the nodes' scheduling priority (below 0: ahead of the other
        processes of a shared machine, as nodes of their own would be; it needs
        CAP_SYS_NICE, without which the nodes run at the default)."""
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.size = nodes
        self._own_directory = directory is None
        self.directory = Path(directory) if directory else None
        self.port = port
        self.config = {**default_properties(nodes), **dict(config or {})}
        self.heap = heap
        self.jvm_options = list(jvm_options)
        self.java = java
        self.start_timeout = start_timeout
        self.class_archive = class_archive
        self.secured = secured
        self.replication_proxies = replication_proxies
        self.niceness = niceness
        self._replication_links: dict[int, TcpProxy] = {}  # node -> the proxy in front of it
        self._replication_ports: dict[int, tuple[int, int]] = {}  # node -> (its own, proxy's)
        self.cluster_id = _random_cluster_id()
        self.nodes: dict[int, KafkaNode] = {}
        self.start_seconds: float | None = None  # how long the last start() took

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every broker, comma-separated (``bootstrap.servers``)."""
        self._require_started()
        return ",".join(node.bootstrap for node in self.nodes.values())

    def bootstrap_for(self, listener: str) -> str:
        """Every broker's address on one client listener (``SASL_SSL`` when secured)."""
        self._require_started()
        return ",".join(node.bootstrap_for(listener) for node in self.nodes.values())

    def node(self, node_id: int) -> KafkaNode:
        self._require_started()
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id}: the nodes are {sorted(self.nodes)}") from None

    # --- lifecycle ---

    def start(self) -> KafkaCluster:
        began = time.monotonic()
        java = find_java(self.java)
        classpath = jars.classpath()
        jvm_options = list(self.jvm_options)
        archive = existing_archive(java) if self.class_archive else None
        if archive is not None:
            jvm_options.append(f"-XX:SharedArchiveFile={archive}")
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="onceflow-kafka-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        atexit.register(self._at_exit)
        try:
            self.nodes = self._make_nodes(java, classpath, jvm_options)
            for node_id, (own, proxied) in self._replication_ports.items():
                link = TcpProxy(("127.0.0.1", proxied), ("127.0.0.1", own))
                self._replication_links[node_id] = link.__enter__()
            formats = {
                node_id: node.start_format(self.cluster_id)
                for node_id, node in self.nodes.items()
                if not node.formatted
            }
            for node_id, process in formats.items():
                self.nodes[node_id].check_format(process, self.start_timeout)
            for node in self.nodes.values():
                node.launch()
            deadline = time.monotonic() + self.start_timeout
            for node in self.nodes.values():
                node.wait_started(deadline)
            self.wait_ready(deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self, graceful: bool | None = None) -> None:
        """Stop every node and delete a temporary directory. ``graceful``: SIGTERM first
        (Kafka's controlled shutdown, SIGKILL after 10 s) rather than SIGKILL; by default
        only when the data stays in a directory of yours."""
        atexit.unregister(self._at_exit)
        nodes = list(self.nodes.values())
        if graceful is None:
            graceful = not self._own_directory
        if not graceful:
            for node in nodes:
                node.kill()
        else:
            for node in nodes:
                if node.running and node.process is not None:
                    node.process.terminate()
            deadline = time.monotonic() + GRACEFUL_STOP_SECONDS
            for node in nodes:
                node.terminate(timeout=max(0.1, deadline - time.monotonic()))
        for link in self._replication_links.values():
            link.__exit__(None, None, None)
        self._replication_links.clear()
        if self._own_directory and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _at_exit(self) -> None:
        for node in self.nodes.values():
            node.kill()
        if self._own_directory and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType
    ) -> None:
        self.stop()

    # --- faults ---

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: no controlled shutdown, no flush (like a power cut)."""
        self.node(node_id).kill()

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node's JVM: alive, holding its connections, doing nothing (a broker
        stalled by a long GC or a starved machine); ``resume`` lets it go on."""
        self._signal_node(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal_node(node_id, signal.SIGCONT)

    def _signal_node(self, node_id: int, sig: signal.Signals) -> None:
        pid = self.node(node_id).pid
        if pid is not None:
            os.kill(pid, sig)

    def cut_replication(self, node_id: int) -> None:
        """Cut the node's followers off from it (``replication_proxies``): it goes on
        leading and acknowledging writes (acks=1) they cannot copy, and stays in their
        ISRs until replica.lag.time.max.ms (30 s); ``restore_replication`` ends it."""
        self._replication_link(node_id).cut()

    def restore_replication(self, node_id: int) -> None:
        self._replication_link(node_id).restore()

    def _replication_link(self, node_id: int) -> TcpProxy:
        self.node(node_id)
        if node_id not in self._replication_links:
            raise KafkaClusterError("the cluster was started without replication_proxies")
        return self._replication_links[node_id]

    def terminate(self, node_id: int, timeout: float = 30.0) -> int | None:
        """SIGTERM one node and wait for its controlled shutdown; returns its exit code."""
        return self.node(node_id).terminate(timeout)

    def start_node(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        """Start a stopped node on its old ports and data; returns when it serves Metadata
        listing every running broker."""
        node = self.node(node_id)
        node.launch()
        deadline = time.monotonic() + timeout
        node.wait_started(deadline)
        self._wait_metadata([node], deadline, self._running_ids())

    def restart(self, node_id: int, *, kill: bool = True, timeout: float = START_TIMEOUT) -> None:
        """SIGKILL (or, ``kill=False``, SIGTERM) one node and start it again."""
        if kill:
            self.kill(node_id)
        else:
            self.terminate(node_id)
        self.start_node(node_id, timeout)

    def heal(self, timeout: float = START_TIMEOUT) -> None:
        """Start every node that is not running and wait until all serve Metadata."""
        stopped = [node for node in self.nodes.values() if not node.running]
        deadline = time.monotonic() + timeout
        for node in stopped:
            node.launch()
        for node in stopped:
            node.wait_started(deadline)
        if stopped:
            self.wait_ready(deadline - time.monotonic())

    def running_nodes(self) -> list[int]:
        """The ids of the nodes running now, in order."""
        return sorted(self._running_ids())

    # --- metadata ---

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until every node answers Metadata itself, listing all nodes as brokers."""
        deadline = time.monotonic() + timeout
        self._wait_metadata(list(self.nodes.values()), deadline, set(self.nodes))

    def metadata(self, timeout: float = 10.0) -> Any:
        """confluent-kafka ``ClusterMetadata`` from any running broker."""
        from confluent_kafka import KafkaException

        try:
            return _admin(self._running_bootstrap()).list_topics(timeout=timeout)
        except KafkaException as error:
            raise KafkaClusterError(
                f"no metadata from {self._running_bootstrap()}: {error}"
            ) from None

    def partition(self, topic: str, partition: int = 0) -> Any:
        """confluent-kafka ``PartitionMetadata`` (``leader``, ``replicas``, ``isrs``)."""
        topics = self.metadata().topics
        if topic not in topics or topics[topic].error is not None:
            raise KafkaClusterError(f"topic {topic!r} does not exist")
        partitions = topics[topic].partitions
        if partition not in partitions:
            raise KafkaClusterError(f"topic {topic!r} has no partition {partition}")
        return partitions[partition]

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The node id leading ``topic``'s ``partition`` (-1 while it has no leader)."""
        return int(self.partition(topic, partition).leader)

    def isr_of(self, topic: str, partition: int = 0, *, seen_by: int | None = None) -> list[int]:
        """The partition's in-sync replicas, from any running broker or, ``seen_by``, as
        that node's metadata cache has them (a change reaches one node's cache a little
        before or after another's). The cache is not the partition: a leader checks
        ``min.insync.replicas`` against its partition's own ISR, which it sets a moment
        after its cache (``wait_metadata_applied``)."""
        if seen_by is None:
            return sorted(self.partition(topic, partition).isrs)
        try:
            view = node_metadata(self.node(seen_by).bootstrap, (topic,))
        except OSError as error:
            raise KafkaClusterError(f"node {seen_by} did not answer: {error}") from None
        return view.isrs.get(topic, {}).get(partition, [])

    def wait_metadata_applied(self, node_id: int, timeout: float = 30.0) -> None:
        """Until ``node_id`` has applied every metadata change committed before the call to
        its partitions too, not only to its metadata cache.

        A Kafka broker publishes each new metadata image to its cache first (what Metadata
        answers) and then, in the same step, to its partitions (leader, ISR: what Produce
        checks), one image after the other. A change made now and seen in the node's cache
        is therefore published after every earlier one was applied to the partitions. The
        change is a throwaway one-replica topic, deleted again."""
        from confluent_kafka.admin import NewTopic

        barrier = f"onceflow-barrier-{uuid.uuid4().hex[:12]}"
        admin = _admin(self._running_bootstrap())
        admin.create_topics([NewTopic(barrier, 1, 1)])[barrier].result(timeout)
        deadline = time.monotonic() + timeout
        try:
            while barrier not in self._leaders_seen_by(node_id, barrier):
                if time.monotonic() > deadline:
                    raise KafkaClusterError(
                        f"node {node_id} did not publish a new topic within {timeout:.0f}s"
                    )
                time.sleep(0.05)
        finally:
            admin.delete_topics([barrier])

    def _leaders_seen_by(self, node_id: int, topic: str) -> dict[str, dict[int, int]]:
        try:
            return node_metadata(self.node(node_id).bootstrap, (topic,)).leaders
        except OSError:
            return {}

    def coordinator_of(
        self, *, group: str | None = None, transactional_id: str | None = None
    ) -> int:
        """The node id coordinating a consumer group or a transactional id: the leader of
        its partition of ``__consumer_offsets`` / ``__transaction_state`` (the topic
        exists once a group or a transactional producer has asked for a coordinator)."""
        if (group is None) == (transactional_id is None):
            raise ValueError("give exactly one of group= and transactional_id=")
        topic, key = (
            ("__consumer_offsets", group)
            if group is not None
            else ("__transaction_state", transactional_id)
        )
        assert key is not None
        topics = self.metadata().topics
        if topic not in topics or not topics[topic].partitions:
            raise KafkaClusterError(f"{topic} does not exist yet: no coordinator was asked for")
        return self.leader_of(topic, coordinator_partition(key, len(topics[topic].partitions)))

    def wait_for_topic(self, topic: str, timeout: float = 30.0) -> None:
        """Until every running node knows ``topic`` and a leader for each of its partitions
        (a new topic's metadata reaches the brokers one by one)."""

        def knows(leaders: dict[str, dict[int, int]]) -> bool:
            found = leaders.get(topic)
            return bool(found) and all(leader >= 0 for leader in found.values())

        self._wait_for_every_node(topic, knows, f"do not know topic {topic!r}", timeout)

    def wait_for_topic_gone(self, topic: str, timeout: float = 30.0) -> None:
        """Until no running node knows ``topic`` any more (a deletion, like a creation,
        reaches the brokers one by one)."""
        self._wait_for_every_node(
            topic, lambda leaders: topic not in leaders, f"still know deleted topic {topic!r}",
            timeout,
        )  # fmt: skip

    def _wait_for_every_node(
        self, topic: str, done: Callable[[dict[str, dict[int, int]]], bool], failure: str,
        timeout: float,
    ) -> None:  # fmt: skip
        running = {node.node_id: node.bootstrap for node in self.nodes.values() if node.running}
        waiting = wait_for_every_node(running, topic, done, timeout)
        if waiting:
            raise KafkaClusterError(f"nodes {waiting} {failure} after {timeout:.0f}s")

    def wait_in_sync(
        self,
        topic: str | None = None,
        partitions: Iterable[int] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Until every replica of the partitions is in the ISR (e.g. after a restart).
        Without ``topic``: of every partition of every topic, internal ones too (an
        operator's "no under-replicated partitions" before the next restart)."""

        def lagging() -> str | None:
            topics = self.metadata().topics
            if topic is not None:
                described = topics.get(topic)
                if described is None or described.error is not None:
                    return f"{topic}: partitions ? not fully in sync"
                topics = {topic: described}
            found = [
                f"{name}-{index}"
                for name, described in topics.items()
                if described.error is None
                for index in (
                    described.partitions if partitions is None or topic is None else partitions
                )
                if index not in described.partitions
                or sorted(described.partitions[index].isrs)
                != sorted(described.partitions[index].replicas)
            ]
            return f"partitions {sorted(found)[:10]} not fully in sync" if found else None

        _poll(lagging, timeout)

    def wait_quorum_caught_up(self, timeout: float = 60.0) -> None:
        """Until the controller quorum has a leader and every running voter has copied the
        metadata log up to a high watermark the leader reported after the call began: a
        restarted node is a voter the quorum can fail over to, not one still catching up."""
        target: int | None = None

        def behind() -> str | None:
            nonlocal target
            try:
                view = quorum(self._running_bootstrap().split(",")[0])
            except OSError as error:
                return f"controller quorum did not answer ({error})"
            if view.leader < 0:
                return f"controller quorum has no leader: {view}"
            if target is None:
                target = view.high_watermark
            late = [n for n in self._running_ids() if view.voters.get(n, -1) < target]
            return f"controller quorum voters {late} behind offset {target}" if late else None

        _poll(behind, timeout)

    def rss_bytes(self) -> dict[int, int | None]:
        """Resident memory of each node's JVM."""
        return {node_id: node.rss_bytes() for node_id, node in self.nodes.items()}

    # --- internals ---

    def _make_nodes(
        self, java: str, classpath: str, jvm_options: list[str]
    ) -> dict[int, KafkaNode]:
        assert self.directory is not None
        ids = list(range(1, self.size + 1))
        if self.port:
            broker_ports = [self.port + i for i in range(self.size)]
            for node_id, port in zip(ids, broker_ports, strict=True):
                if not is_free(port):
                    raise KafkaClusterError(
                        f"node {node_id} cannot listen on 127.0.0.1:{port}: "
                        "the port is already in use"
                    )
            controller_ports = free_ports(self.size)
        else:
            both = free_ports(2 * self.size)
            broker_ports, controller_ports = both[: self.size], both[self.size :]
        voters = ",".join(
            f"{node_id}@127.0.0.1:{port}"
            for node_id, port in zip(ids, controller_ports, strict=True)
        )
        secured_ports = free_ports(self.size) if self.secured is not None else []
        if self.replication_proxies and self.size > 1:
            pairs = free_ports(2 * self.size)
            self._replication_ports = {
                node_id: (pairs[index], pairs[self.size + index])
                for index, node_id in enumerate(ids)
            }
        nodes = {}
        for index, (node_id, broker_port, controller_port) in enumerate(
            zip(ids, broker_ports, controller_ports, strict=True)
        ):
            directory = self.directory / f"node-{node_id}"
            listeners = {"PLAINTEXT": broker_port}
            if self.secured is not None:
                listeners[SECURED] = secured_ports[index]
            clients = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
            protocols = ",".join(f"{name}:{name}" for name in listeners)
            replication = ""
            advertised = clients
            if node_id in self._replication_ports:
                own, proxied = self._replication_ports[node_id]
                replication = f"{REPLICATION}://127.0.0.1:{own},"
                advertised = f"{clients},{REPLICATION}://127.0.0.1:{proxied}"
                protocols = f"{protocols},{REPLICATION}:PLAINTEXT"
            properties = {
                "process.roles": "broker,controller",
                "node.id": str(node_id),
                "listeners": f"{clients},{replication}CONTROLLER://127.0.0.1:{controller_port}",
                "advertised.listeners": advertised,
                "listener.security.protocol.map": f"{protocols},CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": REPLICATION if replication else "PLAINTEXT",
                "controller.quorum.voters": voters,
                "log.dirs": str(directory / "data"),
                **(self.secured.properties() if self.secured is not None else {}),
                **self.config,
            }
            node = KafkaNode(
                node_id,
                directory,
                broker_port,
                controller_port,
                properties,
                java=java,
                classpath=classpath,
                heap=self.heap,
                jvm_options=jvm_options,
                listener_ports={k: v for k, v in listeners.items() if k != "PLAINTEXT"},
                format_args=self.secured.format_args() if self.secured is not None else (),
                niceness=self.niceness,
            )
            node.write_config()
            nodes[node_id] = node
        return nodes

    def _wait_metadata(self, nodes: list[KafkaNode], deadline: float, expected: set[int]) -> None:
        """Until each node answers Metadata itself and lists every id in ``expected``."""
        waiting = {node.node_id: node for node in nodes}
        last = "no answer"
        while waiting:
            for node_id, node in list(waiting.items()):
                if not node.running:
                    raise KafkaClusterError(f"node {node_id} exited: {node.cause()}")
                try:
                    view = node_metadata(node.bootstrap)
                except OSError as error:
                    last = str(error)
                    continue
                if expected <= view.brokers:
                    del waiting[node_id]
                else:
                    last = f"it lists brokers {sorted(view.brokers)} of {sorted(expected)}"
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KafkaClusterError(
                    f"nodes {sorted(waiting)} started but do not serve the cluster's "
                    f"metadata ({last})"
                )
            time.sleep(0.1)

    def _running_ids(self) -> set[int]:
        return {node_id for node_id, node in self.nodes.items() if node.running}

    def _running_bootstrap(self) -> str:
        running = [node.bootstrap for node in self.nodes.values() if node.running]
        if not running:
            raise KafkaClusterError("no node of the cluster is running")
        return ",".join(running)

    def _require_started(self) -> None:
        if not self.nodes:
            raise KafkaClusterError("the cluster was not started")


def _poll(check: Callable[[], str | None], timeout: float) -> None:
    """Call ``check`` every 0.2 s until it returns None; KafkaClusterError with its last
    answer (what is still missing) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (missing := check()) is not None:
        if time.monotonic() > deadline:
            raise KafkaClusterError(f"{missing} after {timeout:.0f}s")
        time.sleep(0.2)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    # log_level 0: a node still starting refuses connections; that is not worth a line.
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def _random_cluster_id() -> str:
    """A Kafka Uuid in its base64 form (Kafka avoids ids starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
