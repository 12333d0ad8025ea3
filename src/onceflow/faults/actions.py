"""What a fault does, other than killing a pipeline worker (the run does that itself).

``FaultActions`` is told what the run controls: the embedded broker (a ``BrokerProcess``
it may SIGKILL and start again, with the fsync journal a power loss needs), one proxy per
worker (network cuts and delays), an Apache Kafka cluster and how to find a fault's victim
node, and the database a lock makes unavailable. ``apply`` does one fault; ``release`` is
how it lets a paused worker go on at the right moment (for a fault triggered by output
growth nothing is paused and ``release`` does nothing); ``load(batches)`` is how it lets
in the input the pipeline works on while the fault lasts (a fault strikes a pipeline under
load).
"""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from onceflow.faults.databases import hold_unavailable
from onceflow.faults.group_watch import GroupShape, GroupWatch
from onceflow.faults.schedule import (
    BROKER,
    COORDINATOR_CUT,
    DB_LOCK,
    DISK_FULL,
    NETWORK,
    NETWORK_ACTIONS,
    NODE_ACTIONS,
    PAUSE,
    POWER_LOSS,
    Fault,
)
from onceflow.tcp_proxy import TcpProxy

if TYPE_CHECKING:
    from onceflow.broker.process import BrokerProcess
    from onceflow.kafka_cluster import KafkaCluster

LAG_S = 1.5  # how long a leader's followers are cut off from it before it dies
# ... or longer, until the leader has written what they lack: far below the 30 s
# (replica.lag.time.max.ms) after which it would take them out of its ISRs
LAG_MAX_S = 4.0
REPLICATED_S = 0.3  # what was just written is replicated this soon (loopback)
HOLD_S = 3.0  # how long a network cut, a delay, a full disk or a database lock lasts
DELAY_S = 0.5  # how long each chunk of data waits while the network is slow
PAUSE_S = 5.0  # a paused worker is stopped this long: its group rebalances without it
NODE_DOWN_S = 4.0  # how long a killed Apache Kafka node stays down
MOVED_ON_S = 30.0  # a coordinator cut waits at most this long for the group to move on
WATCH_S = 0.1  # how often it looks
UNDER_FAULT = 2  # batches of input let in for the pipeline to work on while a fault lasts
IN_FLIGHT_S = 0.02  # a released worker's request is on its way within this


class ActionUnavailable(RuntimeError):
    """The run cannot do this fault here (no proxy, no cluster, no journal...)."""


@dataclass(frozen=True, slots=True)
class Victim:
    """The node a node fault kills, what it serves, (a leader) its followers and partition,
    and (a coordinator) how to wait for the moment to kill it: ``moment()`` returns once
    the pipeline is in the middle of what the node serves (or gives up), saying which."""

    node: int
    what: str
    followers: tuple[int, ...] = ()
    partition: tuple[str, int] | None = None  # (topic, partition) it leads
    moment: Callable[[], str] | None = None


@dataclass
class FaultActions:
    broker: BrokerProcess | None = None
    journal: Path | None = None  # the broker's fsync journal (power loss)
    proxies: dict[int, TcpProxy] = field(default_factory=dict)  # worker -> its proxy
    cluster: KafkaCluster | None = None
    victim: Callable[[str], Victim] | None = None  # node action -> the node it kills
    database: tuple[str, str] | None = None  # (url, table) a db-lock makes unavailable
    bootstrap: str | None = None  # the run's own clients' way in (a cut watches the groups)
    hold_s: float = HOLD_S
    pause_s: float = PAUSE_S
    node_down_s: float = NODE_DOWN_S
    lag_s: float = 0.0  # cut a leader's followers off this long before it dies (0: not)
    # actions of the caller's own (the chaos matrix's two-nodes-down): name -> do(release)
    extra: dict[str, Callable[[Callable[[], None]], str]] = field(default_factory=dict)

    def apply(
        self, fault: Fault, release: Callable[[], None],
        load: Callable[[int], None] = lambda _batches: None,
    ) -> str:  # fmt: skip
        """Do ``fault``; what was done, in a few words."""
        action = fault.action
        if action == COORDINATOR_CUT:  # loads once its worker is a zombie
            return self._coordinator_cut(fault, release, load)
        if action in NODE_ACTIONS:  # loads once it knows its victim
            return self._node_down(action, release, load)
        load(UNDER_FAULT)
        if action == BROKER:
            return self._broker_restart(fault, release)
        if action == POWER_LOSS:
            return self._power_loss(release)
        if action == DISK_FULL:
            return self._disk_full(release)
        if action in NETWORK_ACTIONS:
            return self._network(fault, release)
        if action == DB_LOCK:
            return self._database_lock(release)
        if action in self.extra:
            return self.extra[action](release)
        raise ActionUnavailable(f"no action {action!r}")

    # -- the embedded broker ---------------------------------------------------------------

    def _require_broker(self, action: str) -> BrokerProcess:
        if self.broker is None:
            raise ActionUnavailable(f"{action} faults need the embedded broker")
        return self.broker

    def _broker_restart(self, fault: Fault, release: Callable[[], None]) -> str:
        broker = self._require_broker(BROKER)
        if fault.at_request:  # the request is held: the broker dies before answering it
            broker.restart(kill=True)
            return "broker SIGKILLed with the request held, and restarted"
        release()
        time.sleep(random.uniform(0.0, IN_FLIGHT_S))  # a request of the worker is in flight
        broker.restart(kill=True)
        return "broker SIGKILLed and restarted"

    def _power_loss(self, release: Callable[[], None]) -> str:
        from onceflow.log.power_loss import simulate_power_loss

        broker = self._require_broker(POWER_LOSS)
        if self.journal is None:
            raise ActionUnavailable("power-loss faults need the broker's fsync journal")
        release()
        time.sleep(random.uniform(0.0, IN_FLIGHT_S))
        broker.kill()
        simulate_power_loss(broker.data_dir, self.journal, random.Random())
        broker.start()
        return "broker power loss (files cut to their last fsync)"

    def _disk_full(self, release: Callable[[], None]) -> str:
        broker = self._require_broker(DISK_FULL)
        resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
        try:
            release()
            time.sleep(self.hold_s)
        finally:
            resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        return f"broker's files limited (EFBIG) for {self.hold_s:.0f} s"

    # -- the network -----------------------------------------------------------------------

    def _proxy(self, fault: Fault) -> TcpProxy:
        proxy = self.proxies.get(fault.worker)
        if proxy is None:
            raise ActionUnavailable(
                f"{fault.action} faults need a proxy before worker {fault.worker}"
            )
        return proxy

    def _network(self, fault: Fault, release: Callable[[], None]) -> str:
        proxy = self._proxy(fault)
        if fault.action == NETWORK:
            proxy.cut()
            what = f"network of worker {fault.worker} cut for {self.hold_s:.0f} s"
        elif fault.action == PAUSE:
            # the worker is frozen (by the run); its connections drop as a paused
            # process's sessions time out, and its partitions move to the others
            proxy.cut()
            what = (f"worker {fault.worker} paused (SIGSTOP) for {self.pause_s:.0f} s, "
                    "its sessions ended meanwhile")  # fmt: skip
        else:
            proxy.delay(DELAY_S)
            what = (
                f"network of worker {fault.worker} slowed ({DELAY_S:.1f} s per chunk) for "
                f"{self.hold_s:.0f} s"
            )
        try:
            release()
            time.sleep(self.pause_s if fault.action == PAUSE else self.hold_s)
        finally:
            proxy.restore()
        return what

    def _coordinator_cut(
        self, fault: Fault, release: Callable[[], None], load: Callable[[int], None]
    ) -> str:
        """Once the groups are stable with every worker in, cut a worker off from its group
        coordinator (the fault's worker, or one that owns partitions if it owns none) until
        the rest of its group owns its partitions: from then on it is a zombie that still
        fetches them. Half of hold_s later (the new owners have read where to start) a
        batch of input comes in, and for the other half both write it."""
        watch = GroupWatch(self.bootstrap) if self.bootstrap is not None else None
        hosts = [proxy.source for proxy in self.proxies.values() if proxy.source is not None]
        before = watch.settled(MOVED_ON_S, hosts) if watch is not None else {}
        worker = self._owner(before, fault.worker)
        proxy = self._proxy(replace(fault, worker=worker))
        started = time.monotonic()
        proxy.cut(coordinator_only=True)
        moved = ""
        try:
            release()
            if watch is not None and before:
                while not watch.moved_on(before, proxy.source):
                    if time.monotonic() - started > MOVED_ON_S:
                        moved = f"; its group had not moved on after {MOVED_ON_S:.0f} s"
                        break
                    time.sleep(WATCH_S)
                else:
                    moved = f"; its group moved on after {time.monotonic() - started:.1f} s"
            time.sleep(self.hold_s / 2)
            load(1)  # a batch both write: more would cost the faults after it their input
            time.sleep(self.hold_s / 2)
        finally:
            proxy.restore()
        return (f"worker {worker} cut off from its group coordinator{moved}, then "
                f"{self.hold_s:.0f} s more with input")  # fmt: skip

    def _owner(self, groups: dict[str, GroupShape], worker: int) -> int:
        """``worker`` if it owns partitions of a group, else the first worker that does
        (``worker`` when none does, or the hosts are not known)."""

        def owns(n: int) -> bool:
            proxy = self.proxies.get(n)
            host = proxy.source if proxy is not None else None
            return host is not None and any(shape.owns(host) for shape in groups.values())

        if owns(worker):
            return worker
        return next((n for n in sorted(self.proxies) if owns(n)), worker)

    # -- the database ------------------------------------------------------------------------

    def _database_lock(self, release: Callable[[], None]) -> str:
        if self.database is None:
            raise ActionUnavailable("db-lock faults need the pipeline's database")
        url, table = self.database
        with hold_unavailable(url, table):
            release()
            time.sleep(self.hold_s)
        return f"database locked for {self.hold_s:.0f} s"

    # -- Apache Kafka nodes --------------------------------------------------------------------

    def _node_down(
        self, action: str, release: Callable[[], None], load: Callable[[int], None]
    ) -> str:
        """SIGKILL the victim's node and start it again after node_down_s: a leader once it
        acknowledged records alone, its followers cut off from it (they are not on them), a
        coordinator at its moment. The input it works on comes in once the victim is known
        (a leader's, once its followers are cut off), not before: a pipeline done with it
        by the kill needs nothing of the dead node (input let in afterwards is not readable
        while the dead node is in its ISR).

        A leader's followers are cut off on the cluster's replication proxies, not stopped
        (SIGSTOP): stopped nodes also lead the pipeline's other partitions, and a copier
        whose flush waited on them wrote nothing to the victim for 4 s (1 of 8 trials on a
        loaded machine, 2026-12-06); cut off, they go on serving everything else."""
        cluster = self.cluster
        if cluster is None or self.victim is None:
            raise ActionUnavailable(
                f"{action} faults need an Apache Kafka cluster this run controls"
            )
        victim = self.victim(action)
        what = victim.what
        lagging = ""
        if victim.followers and self.lag_s:
            if not cluster.replication_proxies:
                raise ActionUnavailable("leader faults need a KafkaCluster started with "
                                        "replication_proxies=True")  # fmt: skip
            cluster.cut_replication(victim.node)
            try:
                load(UNDER_FAULT)
                release()
                lagged, written = self._lead_alone(cluster, victim)
                cluster.kill(victim.node)
            finally:
                cluster.restore_replication(victim.node)
            wrote = (f"it wrote {written:,} bytes they lack" if written
                     else "it wrote nothing they lack")  # fmt: skip
            lagging = f" after its followers were cut off from it for {lagged:.1f} s ({wrote})"
        else:
            load(UNDER_FAULT)
            release()
            if victim.moment is not None:
                what = f"{what}, {victim.moment()}"
            cluster.kill(victim.node)
        time.sleep(self.node_down_s)
        cluster.heal()
        return (f"node {victim.node} ({action} of {what}) SIGKILLed{lagging}, back after "
                f"{self.node_down_s:.0f} s")  # fmt: skip

    def _lead_alone(self, cluster: KafkaCluster, victim: Victim) -> tuple[float, int]:
        """With the leader's followers cut off: lag_s, or longer (up to LAG_MAX_S) until the
        leader's replica holds records theirs lack, as the pipeline's next write lands on
        it alone (a pipeline slowed by a loaded machine may be between two writes at lag_s).
        How long that was, and how many bytes they lack (replicas hold the same batches)."""
        started = time.monotonic()
        partition = victim.partition
        if partition is None:
            time.sleep(self.lag_s)
            return self.lag_s, 0

        def lacking() -> int:
            replicas = [cluster.node(n).log_bytes(*partition) for n in victim.followers]
            return cluster.node(victim.node).log_bytes(*partition) - max(replicas)

        time.sleep(self.lag_s)
        while (lacked := lacking()) <= 0 and time.monotonic() - started < LAG_MAX_S:
            time.sleep(WATCH_S)
        if lacked > 0:
            time.sleep(REPLICATED_S)  # its answer reaches the pipeline, which goes on past it
        return time.monotonic() - started, max(lacking(), 0)
